# broker/ — the broker's logic as a library (pairing rules, ...) and, later,
# the pivfarm-broker program over it.
BROKER_OBJS := build/broker/pairing.o
BROKER_LIB  := build/libbroker.a
LIBS += $(BROKER_LIB)

$(BROKER_LIB): $(BROKER_OBJS)
	$(AR) rcs $@ $^
