// Package packaging holds the tests of Sluice's installation: the
// Makefile's install and uninstall, the systemd units, the ipfboot boot
// script run in a test namespace, and the Debian package installed on
// this machine with apt-get and purged. The files it tests are beside it:
// ipfboot.in, systemd/*.service.in, etc/, deb/.
package packaging
