# ctl/ — pivctl, the operator's command line: a thin main (pivctl.c, the
# commands' table) over one file per group of commands (ctl/ctl.h). h5.c,
# the HDF5 writer, is built against HDF5 alone; mat.c, the MAT-file
# writer, against libmatio alone.
CTL_OBJS := build/ctl/pivctl.o build/ctl/args.o build/ctl/request.o build/ctl/print.o \
            build/ctl/json.o build/ctl/status.o build/ctl/steer.o build/ctl/tail.o \
            build/ctl/record.o build/ctl/replay.o build/ctl/storage.o build/ctl/keys.o \
            build/ctl/export.o build/ctl/units.o build/ctl/stats.o build/ctl/h5.o \
            build/ctl/output.o build/ctl/mat.o build/ctl/ensemble.o
build/ctl/%.o: LAYER_PKGS := $(ZMQ_PKGS)
build/ctl/h5.o: LAYER_PKGS := $(HDF5_PKGS)
build/ctl/mat.o: LAYER_PKGS := $(MATIO_PKGS)

bin/pivctl: $(CTL_OBJS) $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(ZMQ_LIBS) $(STORE_LIBS) $(PIV_LIBS) $(HDF5_LIBS) $(MATIO_LIBS)

PROGRAMS += bin/pivctl
