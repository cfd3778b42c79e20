# Sluice: build, install and uninstall the commands, man pages, boot
# script, systemd units, udev rule and example configurations (see
# README, Install).
#
#   make                      build the commands into ./bin
#   sudo make install         PREFIX=/usr/local; DESTDIR for staging
#   sudo make uninstall       the same variables as install
#   make man                  regenerate docs/man/manN from docs/man/*.md
#   make deb                  build dist/sluice_VERSION_ARCH.deb
#
# Configuration files go to $(SYSCONFDIR)/sluice (/etc/sluice, whatever
# the PREFIX: that is where the boot script looks); install never
# overwrites one, and uninstall removes only those still as installed.

PREFIX     ?= /usr/local
DESTDIR    ?=
SBINDIR    ?= $(PREFIX)/sbin
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR    ?= $(PREFIX)/share
MANDIR     ?= $(DATADIR)/man
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
# udev reads /usr/local/lib/udev/rules.d as well as /usr/lib/udev/rules.d
UDEVRULESDIR ?= $(PREFIX)/lib/udev/rules.d
GO         ?= go
BUILDDIR   ?= bin
CGO_ENABLED ?= 0

COMMANDS := ipf ipfstat ipmon ipnat ippool ipftest ipqosadmin netperf netserver sluice
UNITS    := sluice.service sluice-ipmon.service sluice-ipqos.service sluice-exporter.service sluice-resync@.service
UDEVRULES := 90-sluice.rules
CONFS    := sluice.conf ipf.conf ipnat.conf ippool.conf ipqos.conf
MAN1     := $(wildcard docs/man/man1/*.1)
MAN5     := $(wildcard docs/man/man5/*.5)
MAN8     := $(wildcard docs/man/man8/*.8)
EXAMPLES_IPF  := $(wildcard examples/ipf/*)
EXAMPLES_QOS  := $(wildcard examples/ipqos/*)

SUBST = sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@LIBEXECDIR@|$(LIBEXECDIR)|g' \
	-e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g'

.PHONY: all build install uninstall man deb clean

all: build

# static binaries (CGO_ENABLED=0): nothing here needs libc, a boot script
# should not depend on it, and a cgo build pays the dynamic loader at every
# start (~4 ms of netperf's CPU per run, which its CPU figures count);
# -s -w only drop the symbol table and DWARF (stack traces stay)
build:
	CGO_ENABLED=$(CGO_ENABLED) $(GO) build -ldflags='-s -w' -o $(BUILDDIR)/ $(addprefix ./cmd/,$(COMMANDS))

$(BUILDDIR)/gen:
	mkdir -p $@

# the files that carry install paths, made for this install's variables
gen: | $(BUILDDIR)/gen
	$(SUBST) packaging/ipfboot.in > $(BUILDDIR)/gen/ipfboot
	$(SUBST) packaging/etc/sluice.conf.in > $(BUILDDIR)/gen/sluice.conf
	for u in $(UNITS); do $(SUBST) packaging/systemd/$$u.in > $(BUILDDIR)/gen/$$u || exit 1; done
	for f in ipf.conf ipnat.conf ippool.conf ipqos.conf; do cp packaging/etc/$$f $(BUILDDIR)/gen/$$f || exit 1; done

install: build gen
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBEXECDIR)/sluice $(DESTDIR)$(UNITDIR) $(DESTDIR)$(UDEVRULESDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DATADIR)/sluice/examples/ipf $(DESTDIR)$(DATADIR)/sluice/examples/ipqos \
		$(DESTDIR)$(DATADIR)/sluice/grafana $(DESTDIR)$(SYSCONFDIR)/sluice
	for c in $(COMMANDS); do install -m 0755 $(BUILDDIR)/$$c $(DESTDIR)$(SBINDIR)/$$c || exit 1; done
	install -m 0755 $(BUILDDIR)/gen/ipfboot $(DESTDIR)$(LIBEXECDIR)/sluice/ipfboot
	for u in $(UNITS); do install -m 0644 $(BUILDDIR)/gen/$$u $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	for r in $(UDEVRULES); do install -m 0644 packaging/udev/$$r $(DESTDIR)$(UDEVRULESDIR)/$$r || exit 1; done
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(EXAMPLES_IPF) $(DESTDIR)$(DATADIR)/sluice/examples/ipf/
	install -m 0644 $(EXAMPLES_QOS) $(DESTDIR)$(DATADIR)/sluice/examples/ipqos/
	install -m 0644 docs/grafana/sluice.json $(DESTDIR)$(DATADIR)/sluice/grafana/sluice.json
	for f in $(CONFS); do \
		if [ -e $(DESTDIR)$(SYSCONFDIR)/sluice/$$f ]; then echo "keeping $(DESTDIR)$(SYSCONFDIR)/sluice/$$f"; \
		else install -m 0644 $(BUILDDIR)/gen/$$f $(DESTDIR)$(SYSCONFDIR)/sluice/$$f || exit 1; fi; done

uninstall: gen
	for c in $(COMMANDS); do rm -f $(DESTDIR)$(SBINDIR)/$$c; done
	rm -f $(DESTDIR)$(LIBEXECDIR)/sluice/ipfboot
	-rmdir $(DESTDIR)$(LIBEXECDIR)/sluice
	for u in $(UNITS); do rm -f $(DESTDIR)$(UNITDIR)/$$u; done
	for r in $(UDEVRULES); do rm -f $(DESTDIR)$(UDEVRULESDIR)/$$r; done
	for m in $(notdir $(MAN1)); do rm -f $(DESTDIR)$(MANDIR)/man1/$$m; done
	for m in $(notdir $(MAN5)); do rm -f $(DESTDIR)$(MANDIR)/man5/$$m; done
	for m in $(notdir $(MAN8)); do rm -f $(DESTDIR)$(MANDIR)/man8/$$m; done
	rm -rf $(DESTDIR)$(DATADIR)/sluice
	for f in $(CONFS); do p=$(DESTDIR)$(SYSCONFDIR)/sluice/$$f; \
		if [ -e $$p ] && ! cmp -s $$p $(BUILDDIR)/gen/$$f; then echo "keeping $$p: changed since it was installed"; \
		else rm -f $$p; fi; done
	-rmdir $(DESTDIR)$(SYSCONFDIR)/sluice 2>/dev/null

man:
	$(GO) run ./internal/manpage/mangen

deb:
	packaging/deb/build.sh

clean:
	rm -rf $(BUILDDIR) dist
