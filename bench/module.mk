# bench/ — benchmarks that print figures; they never pass or fail on time.
build/bench/bench_%: build/bench/bench_%.o $(PIV_LIB) $(COMMON_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(PIV_LIBS)

BENCHES += build/bench/bench_piv
