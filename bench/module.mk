# bench/ — benchmarks that print figures; they never pass or fail on time.
build/bench/bench_%: build/bench/bench_%.o $(BROKER_LIB) $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(ALL_LIBS)

BENCHES += build/bench/bench_piv build/bench/bench_farm
