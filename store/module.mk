# store/ — the SQLite store: schema, migrations, group commit, queries.
STORE_OBJS := build/store/store.o build/store/json.o build/store/floor.o
STORE_LIB  := build/libstore.a
LIBS += $(STORE_LIB)

$(STORE_LIB): $(STORE_OBJS)
	$(AR) rcs $@ $^
