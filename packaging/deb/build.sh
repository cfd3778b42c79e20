#!/bin/sh
# Builds dist/sluice_VERSION_ARCH.deb from the repository with make
# install and dpkg-deb (no other tool). VERSION defaults to
# packaging/VERSION; OUT to ./dist; BUILDDIR (where the commands are
# built) to a temporary directory.
set -eu
cd "$(dirname "$0")/../.."
version="${VERSION:-$(cat packaging/VERSION)}"
arch="$(dpkg --print-architecture)"
out="${OUT:-dist}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"

make --no-print-directory install DESTDIR="$root" PREFIX=/usr SYSCONFDIR=/etc \
	LIBEXECDIR=/usr/libexec UNITDIR=/lib/systemd/system UDEVRULESDIR=/lib/udev/rules.d BUILDDIR="${BUILDDIR:-$stage/bin}" >/dev/null

mkdir -p "$root/DEBIAN" "$root/usr/share/doc/sluice"
cp LICENSE "$root/usr/share/doc/sluice/copyright"
# Debian policy: man pages and the changelog compressed with gzip -9n (no
# name or time stamp inside, so two builds of one commit are the same)
find "$root/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} +
when="$(git log -1 --format=%cD 2>/dev/null || date -R)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
printf 'sluice (%s) unstable; urgency=medium\n\n  * Built from the repository at %s.\n\n -- Sluice developers <sluice@localhost>  %s\n' \
	"$version" "$commit" "$when" | gzip -9n > "$root/usr/share/doc/sluice/changelog.Debian.gz"
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat > "$root/DEBIAN/control" <<CONTROL
Package: sluice
Version: $version
Architecture: $arch
Maintainer: Sluice developers <sluice@localhost>
Installed-Size: $size
Section: net
Priority: optional
Recommends: iproute2
Description: IPFilter, IPQoS and netperf for Linux on eBPF
 Sluice re-creates HP-UX IPFilter (ipf, ipfstat, ipmon, ipnat, ippool,
 ipftest), HP-UX IPQoS (ipqosadmin) and netperf/netserver on Linux, with
 eBPF datapaths attached with TCX. Includes systemd units that load
 /etc/sluice at boot (not enabled by the package), a udev rule that
 attaches a loaded filter to network interfaces that appear, a Prometheus exporter
 (sluice exporter) and a Grafana dashboard.
CONTROL
(cd "$root" && find etc -type f | sed 's|^|/|' | sort) > "$root/DEBIAN/conffiles"
cp packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
mkdir -p "$out"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$out/sluice_${version}_${arch}.deb" >/dev/null
echo "$out/sluice_${version}_${arch}.deb"
