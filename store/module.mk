# store/ — the SQLite store: schema and migrations (schema.c), statements
# and the group's transaction (tx.c), the broker's writes (write.c), the
# operator's (operate.c), the readers' queries (read.c), the statistics'
# checkpoints (stats.c), ensemble jobs (ensemble.c), its own files under faults (files.c),
# its backups (backup.c);
# store/internal.h is what they share.
STORE_OBJS := build/store/schema.o build/store/tx.o build/store/write.o \
              build/store/operate.o build/store/read.o \
              build/store/stats.o build/store/files.o \
              build/store/ensemble.o build/store/backup.o
STORE_LIB  := build/libstore.a
LIBS += $(STORE_LIB)
build/store/%.o: LAYER_PKGS := $(STORE_PKGS)

$(STORE_LIB): $(STORE_OBJS)
	rm -f $@ && $(AR) rcs $@ $^
