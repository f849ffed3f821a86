# watcher/ — inotify or polling over the watch root, and pivfarm-watcher.
WATCHER_OBJS := build/watcher/watcher.o
WATCHER_LIB  := build/libwatcher.a
LIBS += $(WATCHER_LIB)
build/watcher/%.o: LAYER_PKGS := $(ZMQ_PKGS)

$(WATCHER_LIB): $(WATCHER_OBJS)
	rm -f $@ && $(AR) rcs $@ $^

bin/pivfarm-watcher: build/watcher/watcher_main.o $(WATCHER_LIB) $(COMMON_LIB) $(PIV_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(ZMQ_LIBS) $(PIV_LIBS)

PROGRAMS += bin/pivfarm-watcher
