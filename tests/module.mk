# tests/ — one Check suite per module; each is a program run by 'make check'.
build/tests/test_%: build/tests/test_%.o build/tests/testutil.o $(PIV_LIB) $(COMMON_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(TEST_LIBS) $(PIV_LIBS)

build/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PIV_CFLAGS) $(TEST_CFLAGS) -c -o $@ $<

TESTS += build/tests/test_image build/tests/test_synth build/tests/test_piv build/tests/test_programs
