# common/ — logging, small utilities, the wire protocol and the configuration
# file shared by every program.
COMMON_OBJS := build/common/log.o build/common/util.o build/common/proto.o \
               build/common/config.o build/common/cli.o build/common/daemon.o \
               build/common/secure.o build/common/sha256.o \
               build/common/iobench.o build/common/path.o \
               build/common/ask.o
COMMON_LIB  := build/libcommon.a
LIBS += $(COMMON_LIB)
build/common/%.o: LAYER_PKGS := $(ZMQ_PKGS) $(SODIUM_PKGS) $(SYSTEMD_PKGS)

$(COMMON_LIB): $(COMMON_OBJS)
	$(AR) rcs $@ $^
