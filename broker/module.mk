# broker/ — the broker's logic as a library (pairing rules, the reactor) and
# the pivfarm-broker program over it.
BROKER_OBJS := build/broker/pairing.o build/broker/ingest.o build/broker/peers.o \
               build/broker/control.o build/broker/settings.o build/broker/sched.o \
               build/broker/feedback.o build/broker/model.o build/broker/text.o build/broker/publish.o \
               build/broker/results.o build/broker/replay.o build/broker/status.o \
               build/broker/clocks.o build/broker/dispatch.o build/broker/mount.o \
               build/broker/broker.o build/broker/storage.o \
               build/broker/archive.o build/broker/stats.o build/broker/control_units.o \
               build/broker/control_piv.o build/broker/ensemble.o build/broker/control_ensemble.o \
               build/broker/control_lifecycle.o
BROKER_LIB  := build/libbroker.a
LIBS += $(BROKER_LIB)
build/broker/%.o: LAYER_PKGS := $(ZMQ_PKGS)

$(BROKER_LIB): $(BROKER_OBJS)
	rm -f $@ && $(AR) rcs $@ $^

bin/pivfarm-broker: build/broker/broker_main.o $(BROKER_LIB) $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(ALL_LIBS)

PROGRAMS += bin/pivfarm-broker
