# ctl/ — pivctl, the operator's command line.
build/ctl/%.o: LAYER_PKGS := $(ZMQ_PKGS)
bin/pivctl: build/ctl/pivctl.o $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(ZMQ_LIBS) $(STORE_LIBS) $(PIV_LIBS)

PROGRAMS += bin/pivctl
