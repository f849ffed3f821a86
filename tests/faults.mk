# tests/faults.mk — 'make faults': the full fault runs of tests/test_faults.c
# (2,000 pairs, 10 kills of each kind, the store locked by another process
# for 20 s; 'make check' runs the same code small)
# and the bad-input suite, with their figures gathered in build/faults.txt
# (RELIABILITY.md quotes them). Included from the top-level Makefile.

FAULTS_PAIRS ?= 2000
FAULTS_KILLS ?= 10
FAULTS_LOCK_S ?= 20

faults: $(PROGRAMS) build/tests/test_faults build/tests/test_badinput
	@set -e; export PIVFARM_BIN=$(CURDIR)/bin PIVFARM_DATA=$(CURDIR)/tests/data; \
	PIVFARM_FAULTS_PAIRS=$(FAULTS_PAIRS) PIVFARM_FAULTS_KILLS=$(FAULTS_KILLS) \
	PIVFARM_FAULTS_LOCK_S=$(FAULTS_LOCK_S) \
	    build/tests/test_faults | tee build/faults.txt; \
	build/tests/test_badinput | tee -a build/faults.txt; \
	echo "== figures"; grep '^figures:' build/faults.txt; \
	echo "bad inputs refused: $$(grep -cE '^(tiff|control|cgi) .*(failed: |4[0-9][0-9] )' build/faults.txt)" \
	     "(plus the socket cases, asserted in tests/test_badinput.c)"

.PHONY: faults
