# fuzz/ — libFuzzer harnesses (make fuzz) and the sanitizer runs (make check-asan).
# None of this is part of 'make check': each target installs what it needs
# when missing (fuzz/deps.sh) and builds outside build/ and bin/.
#   make fuzz            each harness FUZZ_SECONDS (60) on a copy of its corpus,
#                        then the regression inputs; fails on any crash
#   make fuzz-regress    corpora and regression inputs once through the harnesses
#   make check-asan      every suite built with ASan and UBSan (in build-asan/)
#   make check-valgrind  the unit suites under valgrind, CK_FORK=no
# A crash leaves its input as build-fuzz/crash-<harness>-*: fix the code,
# then keep the input in fuzz/regressions/<harness>/.

FUZZ_CC        ?= clang
FUZZ_SECONDS   ?= 60
FUZZ_DIR       := build-fuzz
FUZZ_HARNESSES := image proto field config cli json query
FUZZ_SAN       := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS     = -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -MMD -MP -I. -O1 -g $(FUZZ_SAN)
# The code under test: the layers' own object lists (module.mk of piv/,
# common/, store/), compiled with coverage for libFuzzer into one archive,
# so that each harness links only what it uses.
FUZZ_SRCS      := $(patsubst build/%.o,%.c,$(PIV_OBJS) $(COMMON_OBJS) $(STORE_OBJS)) fuzz/fuzz.c \
                  dashboard-cgi/query.c dashboard-cgi/esc.c
FUZZ_LIB       := $(FUZZ_DIR)/libfuzzed.a
FUZZ_BINS      := $(FUZZ_HARNESSES:%=$(FUZZ_DIR)/fuzz_%)
# Leaks count as findings; the harnesses' limits keep allocations small.
FUZZ_OPTS      := -detect_leaks=1 -rss_limit_mb=2048 -timeout=25

FUZZ_LIB_OBJS  := $(FUZZ_SRCS:%.c=$(FUZZ_DIR)/%.o)
FUZZ_OBJS      := $(FUZZ_LIB_OBJS) $(FUZZ_HARNESSES:%=$(FUZZ_DIR)/fuzz/fuzz_%.o)

$(FUZZ_OBJS): $(FUZZ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c -o $@ $<

# With .SECONDARY, an object missing from an archive newer than the others
# is not built: the lists' module.mk files make a longer list rebuild it.
$(FUZZ_LIB): $(FUZZ_LIB_OBJS) piv/module.mk common/module.mk store/module.mk
	rm -f $@ && $(AR) rcs $@ $(filter %.o,$^)

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(ALL_LIBS)

# Fuzzing works on a copy of the corpus (libFuzzer adds to it), so the tree
# is left as it was; new inputs worth keeping are copied in by hand.
fuzz: deps
	@./fuzz/deps.sh fuzzer
	@$(MAKE) -q $(FUZZ_BINS) || $(MAKE) --no-print-directory $(FUZZ_BINS)
	@failed=0; for h in $(FUZZ_HARNESSES); do \
	    work=$$(mktemp -d); cp -R fuzz/corpus/$$h/. $$work/; \
	    dict=; [ -f fuzz/$$h.dict ] && dict=-dict=fuzz/$$h.dict; \
	    echo "== fuzz_$$h, $(FUZZ_SECONDS) s"; \
	    $(FUZZ_DIR)/fuzz_$$h $(FUZZ_OPTS) $$dict -max_total_time=$(FUZZ_SECONDS) \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/crash-$$h- $$work \
	        >$(FUZZ_DIR)/fuzz_$$h.log 2>&1 || { failed=1; tail -n 40 $(FUZZ_DIR)/fuzz_$$h.log; }; \
	    grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|Done)' \
	        $(FUZZ_DIR)/fuzz_$$h.log || true; \
	    rm -rf $$work; \
	done; [ $$failed = 0 ] && $(MAKE) --no-print-directory fuzz-regress

# Every corpus and regression input once through its harness.
fuzz-regress: deps
	@./fuzz/deps.sh fuzzer
	@$(MAKE) -q $(FUZZ_BINS) || $(MAKE) --no-print-directory $(FUZZ_BINS)
	@failed=0; for h in $(FUZZ_HARNESSES); do \
	    inputs=$$(find fuzz/corpus/$$h fuzz/regressions/$$h -type f 2>/dev/null); \
	    printf '== fuzz_%s: %s inputs\n' $$h $$(echo "$$inputs" | grep -c .); \
	    $(FUZZ_DIR)/fuzz_$$h $(FUZZ_OPTS) $$inputs >$(FUZZ_DIR)/regress_$$h.log 2>&1 \
	        || { failed=1; tail -n 40 $(FUZZ_DIR)/regress_$$h.log; }; \
	done; exit $$failed

# The whole tree, minus what is built, is copied into build-asan/tree and
# built there with the sanitizers (the Makefile writes to build/ and bin/ of
# its own directory).
ASAN_DIR   := build-asan
# -O2 as the normal build (gcc's warnings differ at -O1); -Wno-error: the
# normal build already fails on warnings, this one is for what runs.
ASAN_FLAGS := -O2 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -Wno-error \
              -fno-omit-frame-pointer
check-asan: deps
	@mkdir -p $(ASAN_DIR)/tree
	@tar -c --exclude=./build --exclude=./bin --exclude='./build-*' --exclude=./run \
	    --exclude=./.git . | tar -x -C $(ASAN_DIR)/tree
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	    $(MAKE) --no-print-directory -C $(ASAN_DIR)/tree CFLAGS='$(ASAN_FLAGS)' \
	    LDFLAGS='-fsanitize=address,undefined' test

# The unit suites (no processes, no timing) in one process each, so that
# valgrind follows every test.
VALGRIND_TESTS := $(addprefix build/tests/test_,image proto config store pairing sched feedback json)
check-valgrind: deps
	@./fuzz/deps.sh valgrind
	@$(MAKE) -q $(PROGRAMS) $(VALGRIND_TESTS) \
	    || $(MAKE) --no-print-directory $(PROGRAMS) $(VALGRIND_TESTS)
	@failed=0; for t in $(VALGRIND_TESTS); do \
	    echo "== valgrind $$t"; \
	    CK_FORK=no PIVFARM_BIN=$(CURDIR)/bin PIVFARM_DATA=$(CURDIR)/tests/data \
	        valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
	        --suppressions=fuzz/valgrind.supp $$t || failed=1; \
	done; exit $$failed

.PHONY: fuzz fuzz-regress check-asan check-valgrind

-include $(shell find $(FUZZ_DIR) -name '*.d' 2>/dev/null)

clean: fuzz-clean
fuzz-clean:
	rm -rf $(FUZZ_DIR) $(ASAN_DIR)
.PHONY: fuzz-clean
