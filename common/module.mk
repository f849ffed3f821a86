# common/ — logging, small utilities, the wire protocol, the configuration
# file, the tables of pairing rules and feedback quantities, and JSON
# (jansson: jdoc reads, jout writes) shared by every program.
COMMON_OBJS := build/common/log.o build/common/util.o build/common/proto.o \
               build/common/config.o build/common/cli.o build/common/daemon.o \
               build/common/secure.o build/common/sha256.o \
               build/common/iobench.o build/common/path.o \
               build/common/ask.o build/common/pairing_rule.o \
               build/common/feedback_quantity.o \
               build/common/jdoc.o build/common/jout.o
COMMON_LIB  := build/libcommon.a
LIBS += $(COMMON_LIB)
build/common/%.o: LAYER_PKGS := $(ZMQ_PKGS) $(SODIUM_PKGS) $(SYSTEMD_PKGS)

$(COMMON_LIB): $(COMMON_OBJS)
	rm -f $@ && $(AR) rcs $@ $^
