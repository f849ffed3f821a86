# tests/ — one Check suite per module; each is a program run by 'make check'.
# Every suite links every library (static archives: only what it uses).
build/tests/test_%: build/tests/test_%.o build/tests/testutil.o $(BROKER_LIB) $(AGENT_LIB) \
                    $(WATCHER_LIB) $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(TEST_LIBS) $(ALL_LIBS)

build/tests/%.o: LAYER_PKGS := $(KNOWN_PKGS)
build/tests/%.o: tests/%.c | $(DENY_STUBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LAYER_CFLAGS) -c -o $@ $<

TESTS += build/tests/test_image build/tests/test_synth build/tests/test_piv \
         build/tests/test_programs build/tests/test_proto build/tests/test_config \
         build/tests/test_store build/tests/test_pairing build/tests/test_sched \
         build/tests/test_feedback build/tests/test_json build/tests/test_farm \
         build/tests/test_ops build/tests/test_dashboard \
         build/tests/test_deploy build/tests/test_cluster build/tests/test_faults \
         build/tests/test_badinput build/tests/test_security build/tests/test_storage \
         build/tests/test_path build/tests/test_systemd build/tests/test_units \
         build/tests/test_stats build/tests/test_settings build/tests/test_process

# Each vector's uncertainty (issue 27): the engine's sigma, pivfarm-piv's
# columns, the codec.
TESTS += build/tests/test_uncertainty

# pivctl's files in physical units (export, stats), read by h5dump, h5py and vtk.
TESTS += build/tests/test_export

# The cameras of a stereo rig (issue 26): the points reader is outside
# libpiv (libxml2, piv/module.mk), linked here as pivfarm-calib links it.
TESTS += build/tests/test_camera
build/tests/test_camera: build/piv/points.o
build/tests/test_camera: ALL_LIBS += $(XML_LIBS)

# Stereo PIV's reconstruction (issue 26): synthetic pinhole cameras, and
# case E's real pair through pivfarm-calib and pivfarm-piv --cameras.
TESTS += build/tests/test_stereo

# Stereo through the real farm (issue 26): four-frame tasks, an agent
# killed mid-task, w in the results.
TESTS += build/tests/test_stereo_farm

# Ensemble correlation (issue 27): sums that merge to the bit, their bytes.
TESTS += build/tests/test_ensemble

# Ensemble correlation as a farm job (issue 27): chunks on two agents, one
# SIGKILLed mid-run, the field exported; bad requests and partials.
TESTS += build/tests/test_ensemble_farm

# The store's lifecycle through the real farm (issue 28): an online backup
# under load, purge, vacuum, forgetting agents, the migration's backup.
TESTS += build/tests/test_lifecycle
