# common/ — logging and small utilities shared by every program.
COMMON_OBJS := build/common/log.o build/common/util.o
COMMON_LIB  := build/libcommon.a
LIBS += $(COMMON_LIB)

$(COMMON_LIB): $(COMMON_OBJS)
	$(AR) rcs $@ $^
