# pivfarm — one non-recursive Makefile; each directory contributes a module.mk
# with explicit object lists. Every library comes through pkg-config.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
PKG_CONFIG ?= pkg-config

# CFLAGS and LDFLAGS are the user's (e.g. make CFLAGS='-O1 -g -fsanitize=address');
# what the build needs regardless lives in ALL_CFLAGS.
CFLAGS  ?= -O2 -g
LDFLAGS ?=
ALL_CFLAGS = -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -MMD -MP -I. $(CFLAGS)

# Libraries by layer: piv/ needs FFTW, libtiff and GSL (the camera fits); common/ (wire protocol,
# configuration, CURVE, SHA-256, JSON) czmq, libsodium and jansson; store/ SQLite. Programs
# link what their layers need.
PIV_PKGS    := fftw3f libtiff-4 gsl
ZMQ_PKGS    := libczmq libzmq jansson
SODIUM_PKGS := libsodium
STORE_PKGS  := sqlite3
TEST_PKGS   := check
# libsystemd (sd_notify, common/daemon.c) for the three daemons only.
SYSTEMD_PKGS := libsystemd
# HDF5 (Debian's serial build) for the export's writer alone (ctl/h5.c),
# with its high-level library's dimension scales (hdf5_hl, which has no
# pkg-config file of its own: it sits beside libhdf5).
HDF5_PKGS := hdf5-serial
# libmatio for the export's .mat writer alone (ctl/mat.c).
MATIO_PKGS := matio
# libxml2 for the XML calibration points (piv/points.c), outside libpiv:
# pivfarm-calib and the suites that read points link it.
XML_PKGS := libxml-2.0

# Every package, for what compiles the layers together (fuzz/module.mk).
PKG_CFLAGS  = $(shell $(PKG_CONFIG) --cflags $(PIV_PKGS) $(ZMQ_PKGS) $(SODIUM_PKGS) $(STORE_PKGS))
PIV_LIBS    = $(shell $(PKG_CONFIG) --libs $(PIV_PKGS)) -lm -pthread
ZMQ_LIBS    = $(shell $(PKG_CONFIG) --libs $(ZMQ_PKGS) $(SODIUM_PKGS))
STORE_LIBS  = $(shell $(PKG_CONFIG) --libs $(STORE_PKGS))
ALL_LIBS    = $(ZMQ_LIBS) $(STORE_LIBS) $(PIV_LIBS)
SYSTEMD_LIBS = $(shell $(PKG_CONFIG) --libs $(SYSTEMD_PKGS))
HDF5_LIBS   = $(shell $(PKG_CONFIG) --libs $(HDF5_PKGS)) -lhdf5_hl
MATIO_LIBS  = $(shell $(PKG_CONFIG) --libs $(MATIO_PKGS))
XML_LIBS    = $(shell $(PKG_CONFIG) --libs $(XML_PKGS))
TEST_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(TEST_PKGS))
TEST_LIBS   = $(shell $(PKG_CONFIG) --libs $(TEST_PKGS))

# Per-layer compiler flags: the objects of a directory compile with the
# flags of the packages in its LAYER_PKGS alone, which its module.mk sets
# ('build/DIR/%.o: LAYER_PKGS := ...'; a directory that sets none may
# include no library). The headers of every other package are hidden: their
# distribution installs them in /usr/include, which no -I can take away,
# so build/deny/PKG/ holds stand-ins of the same names that stop the
# compiler with #error, and -Ibuild/deny/PKG comes first for each package
# the layer may not use. '#include <zmq.h>' in piv/ fails the build.
KNOWN_PKGS := $(PIV_PKGS) $(ZMQ_PKGS) $(SODIUM_PKGS) $(STORE_PKGS) $(TEST_PKGS) $(SYSTEMD_PKGS) \
              $(HDF5_PKGS) $(MATIO_PKGS) $(XML_PKGS)
DENY_fftw3f     := fftw3.h
DENY_libtiff-4  := tiffio.h tiff.h
DENY_libczmq    := czmq.h czmq_library.h czmq_prelude.h
DENY_libzmq     := zmq.h zmq_utils.h
DENY_libsodium  := sodium.h
DENY_jansson    := jansson.h jansson_config.h
DENY_sqlite3    := sqlite3.h sqlite3ext.h
DENY_check      := check.h
DENY_libsystemd := systemd/sd-daemon.h systemd/sd-journal.h systemd/sd-bus.h
DENY_hdf5-serial := hdf5.h H5public.h hdf5_hl.h H5DSpublic.h
DENY_matio      := matio.h matio_pubconf.h
DENY_gsl        := gsl/gsl_errno.h gsl/gsl_multifit.h gsl/gsl_multifit_nlinear.h
DENY_libxml-2.0 := libxml/parser.h libxml/tree.h
DENY_STUBS  := $(foreach p,$(KNOWN_PKGS),$(addprefix build/deny/$(p)/,$(DENY_$(p))))
LAYER_PKGS  :=
LAYER_CFLAGS = $(foreach p,$(filter-out $(LAYER_PKGS),$(KNOWN_PKGS)),-Ibuild/deny/$(p)) \
               $(if $(strip $(LAYER_PKGS)),$(shell $(PKG_CONFIG) --cflags $(LAYER_PKGS)))

PROGRAMS :=
TESTS    :=
BENCHES  :=
LIBS     :=

all: programs

include common/module.mk
include piv/module.mk
include store/module.mk
include broker/module.mk
include agents/module.mk
include watcher/module.mk
include ctl/module.mk
include dashboard-cgi/module.mk
include tests/module.mk
include tests/faults.mk
include bench/module.mk
include fuzz/module.mk

programs: $(PROGRAMS)

# The daemons tell systemd when they are ready (common/daemon.c): they
# alone link libsystemd. Target-specific: the link lines of their module.mk
# take it through ALL_LIBS, ZMQ_LIBS.
bin/pivfarm-broker: ALL_LIBS += $(SYSTEMD_LIBS)
bin/pivfarm-watcher bin/pivfarm-agent: ZMQ_LIBS += $(SYSTEMD_LIBS)

build/%.o: %.c | $(DENY_STUBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LAYER_CFLAGS) -c -o $@ $<

# The stand-ins of the headers a layer may not include (see LAYER_PKGS).
build/deny/%.h:
	@mkdir -p $(dir $@)
	@echo '#error "<$(patsubst $(firstword $(subst /, ,$*))/%,%,$*).h> ($(firstword $(subst /, ,$*))) is not among the packages of this directory (LAYER_PKGS in its module.mk)"' >$@

# 'make check' first installs what is missing (quick when nothing is), then
# builds in a second make, so that pkg-config sees the installed libraries.
check: deps
	@$(MAKE) --no-print-directory test

# Tests: every suite runs; the run fails if any suite fails. CK_FORK stays on
# so that a crash fails one test only. The benches are built (not run): a
# bench that no longer links fails here, not at the next 'make bench'.
# The suites run make as a user would (make install, make dashboard): not
# as a child of this one (its -j jobserver is not theirs).
test: $(PROGRAMS) $(TESTS) $(BENCHES)
	@failed=0; for t in $(TESTS); do \
	    echo "== $$t"; \
	    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
	        PIVFARM_BIN=$(CURDIR)/bin PIVFARM_DATA=$(CURDIR)/tests/data $$t || failed=1; \
	done; exit $$failed

bench: $(PROGRAMS) $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; PIVFARM_BIN=$(CURDIR)/bin $$b || exit 1; done

demo: deps
	@$(MAKE) --no-print-directory programs
	@./deploy/demo.sh

deps:
	@./deploy/deps.sh

# The status page on http://127.0.0.1:8080/ (lighttpd, in the foreground).
dashboard: programs
	@./deploy/dashboard.sh -c conf/pivfarm.conf

# make install [PREFIX=/usr/local] [DESTDIR=]: the programs (bin/), the
# status page and the mount helper (libexec/pivfarm/), the systemd units
# with their paths set to PREFIX, the generator and the polkit rule where
# systemd and polkit read them, the docs with the example configuration and
# the Prometheus alert rules (share/doc/pivfarm/), and the man pages of
# doc/man/ (share/man/man1, man8) naming the docs where they went.
#
# systemd and polkit read fixed directories only, whatever the PREFIX
# (systemd 252 of Debian 12: 'systemd-analyze unit-paths', systemd.generator(7);
# polkit(8)): units from /etc/systemd/system, /usr/local/lib/systemd/system and
# /usr/lib/systemd/system, generators from the same with system-generators,
# rules from /etc/polkit-1/rules.d and /usr/share/polkit-1/rules.d (never
# /usr/local/share/polkit-1). PREFIX=/usr and /usr/local have directories of
# their own there; any other PREFIX needs UNITDIR and GENDIR set (/etc/...):
# make install says so and installs nothing.
BINDIR     = $(PREFIX)/bin
LIBEXECDIR = $(PREFIX)/libexec/pivfarm
UNITDIR   ?= $(PREFIX)/lib/systemd/system
GENDIR    ?= $(PREFIX)/lib/systemd/system-generators
POLKITDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/share,/etc)/polkit-1/rules.d
DOCDIR    ?= $(PREFIX)/share/doc/pivfarm
MANDIR    ?= $(PREFIX)/share/man
UNITS      = pivfarm-broker.service pivfarm-watcher.service pivfarm-agent@.service \
             pivfarm-tmpfs@.service pivfarm-backup.service pivfarm-backup.timer
# One page a program of bin/ but the status page; pivfarm-deploy.8 (a script
# run from the source tree, not installed) stays in doc/man/.
MAN1       = doc/man/pivctl.1 doc/man/pivfarm-piv.1 doc/man/pivfarm-synth.1 doc/man/pivfarm-calib.1
MAN8       = doc/man/pivfarm-broker.8 doc/man/pivfarm-watcher.8 doc/man/pivfarm-agent.8
READ_UNITDIRS   = /etc/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system \
                  /lib/systemd/system
READ_GENDIRS    = $(addsuffix -generators,$(READ_UNITDIRS))
READ_POLKITDIRS = /etc/polkit-1/rules.d /usr/share/polkit-1/rules.d
# Why this install would put a file where nothing reads it, or nothing.
INSTALL_WHY = $(strip \
    $(if $(filter $(patsubst %/,%,$(UNITDIR)),$(READ_UNITDIRS)),,systemd reads no units in $(UNITDIR);) \
    $(if $(filter $(patsubst %/,%,$(GENDIR)),$(READ_GENDIRS)),,systemd runs no generators in $(GENDIR);) \
    $(if $(filter $(patsubst %/,%,$(POLKITDIR)),$(READ_POLKITDIRS)),,polkit reads no rules in $(POLKITDIR);))
INSTALL_REFUSAL = make install: PREFIX=$(PREFIX): $(INSTALL_WHY) set UNITDIR=/etc/systemd/system \
    GENDIR=/etc/systemd/system-generators POLKITDIR=/etc/polkit-1/rules.d, or PREFIX=/usr/local \
    or /usr; nothing installed

install: programs
	@$(if $(INSTALL_WHY),echo '$(INSTALL_REFUSAL)' >&2; exit 1,:)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(UNITDIR) \
	    $(DESTDIR)$(GENDIR) $(DESTDIR)$(POLKITDIR) $(DESTDIR)$(DOCDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(filter-out bin/pivfarm.cgi,$(PROGRAMS)) $(DESTDIR)$(BINDIR)/
	install -m 0755 bin/pivfarm.cgi deploy/systemd/pivfarm-mount $(DESTDIR)$(LIBEXECDIR)/
	for u in $(UNITS); do \
	    sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/libexec/pivfarm/|$(LIBEXECDIR)/|g' \
	        deploy/systemd/$$u >$(DESTDIR)$(UNITDIR)/$$u && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u; \
	done
	install -m 0755 deploy/systemd/pivfarm-generator $(DESTDIR)$(GENDIR)/
	install -m 0644 deploy/systemd/pivfarm.rules $(DESTDIR)$(POLKITDIR)/
	install -m 0644 conf/pivfarm.conf $(DESTDIR)$(DOCDIR)/pivfarm.conf.example
	install -m 0644 README.md doc/*.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 deploy/prometheus/pivfarm.rules.yml $(DESTDIR)$(DOCDIR)/
	for m in $(MAN1) $(MAN8); do \
	    sed 's|/usr/share/doc/pivfarm/|$(DOCDIR)/|g' $$m >$(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/} && \
	        chmod 0644 $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/}; \
	done

# What install put, and nothing else: /etc/pivfarm (each host's own
# configuration and keys), the store and the results stay.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(filter-out bin/pivfarm.cgi,$(PROGRAMS)))) \
	    $(DESTDIR)$(LIBEXECDIR)/pivfarm.cgi $(DESTDIR)$(LIBEXECDIR)/pivfarm-mount \
	    $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) $(DESTDIR)$(GENDIR)/pivfarm-generator \
	    $(DESTDIR)$(POLKITDIR)/pivfarm.rules \
	    $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
	    $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN8)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,README.md $(notdir $(wildcard doc/*.md)) \
	    pivfarm.conf.example pivfarm.rules.yml)
	-rmdir $(DESTDIR)$(DOCDIR) $(DESTDIR)$(LIBEXECDIR) 2>/dev/null
	@echo 'make uninstall: /etc/pivfarm, the store and the results are left as they are'

clean:
	rm -rf bin build

.PHONY: all programs check test bench demo deps dashboard install uninstall clean
.SECONDARY:

-include $(shell find build -name '*.d' 2>/dev/null)
