# The usual entry points of a C library, over the scripts in tools/:
#
#   make                      build (tools/build.sh): target/release/
#   make install              install the built tree (tools/install.sh); PREFIX, LIBDIR,
#                             SYSCONFDIR and DESTDIR as for any library:
#                             make install PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu DESTDIR=/stage
#   make uninstall            remove exactly what the install put there
#   make deb                  a Debian package that stands in for libdapl2 (tools/make-deb.sh)
#   make check                the test command (tools/run-tests.sh)

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
SYSCONFDIR ?= /etc
DESTDIR    ?=
export DESTDIR

INSTALL_ARGS = --prefix "$(PREFIX)" --libdir "$(LIBDIR)" --sysconfdir "$(SYSCONFDIR)"

.PHONY: all install uninstall deb check

all:
	tools/build.sh

install:
	tools/install.sh $(INSTALL_ARGS)

uninstall:
	tools/install.sh --uninstall $(INSTALL_ARGS)

deb: all
	tools/make-deb.sh

check:
	tools/run-tests.sh
