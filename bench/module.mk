# bench/ — benchmarks that print figures; they never pass or fail on time.
# bench_piv includes FFTW, bench_farm czmq, floor.c (SQLite alone, under the
# store) sqlite3: with store/, the only code that includes sqlite3.h.
build/bench/%.o: LAYER_PKGS := $(PIV_PKGS) $(ZMQ_PKGS) $(STORE_PKGS)
# bench_farm's sections and what they share (bench/farm.h).
BENCH_FARM_OBJS := build/bench/farm_util.o build/bench/farm_programs.o build/bench/farm_cycle.o \
                   build/bench/farm_history.o build/bench/farm_piv.o build/bench/farm_latency.o \
                   build/bench/floor.o
build/bench/bench_farm: $(BENCH_FARM_OBJS)
# bench_piv's section 9 (bench/piv_cost.c) runs the agent's processor;
# section 10 (bench/piv_resolution.c) measures resolution on synthetic flows.
build/bench/bench_piv: build/bench/piv_cost.o build/bench/piv_resolution.o build/bench/piv_uncertainty.o build/bench/piv_ensemble.o $(AGENT_LIB) $(COMMON_LIB) $(PIV_LIB)
# The archives as one group: the agent's (bench_piv) needs libpiv's stereo,
# which comes before it in $^.
build/bench/bench_%: build/bench/bench_%.o $(BROKER_LIB) $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -Wl,--start-group $(filter %.a,$^) -Wl,--end-group \
	    $(ALL_LIBS)

BENCHES += build/bench/bench_piv build/bench/bench_farm
# bench_stereo: stereo's cost, accuracy and case E (issue 26); it reads case
# E's XML points (piv/points.o, libxml2, as pivfarm-calib).
build/bench/bench_stereo: build/piv/points.o
build/bench/bench_stereo: ALL_LIBS += $(XML_LIBS)
BENCHES += build/bench/bench_stereo
# bench_stats: what the run statistics' uncertainty costs (issue 27): state
# size, the time to count a field and to encode, with it and without; and
# (section 2, issue 28) the statistics' saves during a run at the rig's
# rate, bytes and the broker's ms per second, and the store's growth.
BENCHES += build/bench/bench_stats

# The store's lifecycle (issue 28): backup, purge and vacuum through the real
# broker and pivctl on a store of 2 x 250 pairs of 217 KB fields (a script:
# the sqlite3 shell fills the store).
BENCHES += bench/lifecycle.sh
