# agents/ — the worker agent: task processing and the agent's reactor, and
# the pivfarm-agent program over them.
AGENT_OBJS := build/agents/process.o build/agents/mask.o build/agents/agent.o \
              build/agents/backgrounds.o
AGENT_LIB  := build/libagent.a
LIBS += $(AGENT_LIB)
build/agents/%.o: LAYER_PKGS := $(ZMQ_PKGS)

$(AGENT_LIB): $(AGENT_OBJS)
	rm -f $@ && $(AR) rcs $@ $^

bin/pivfarm-agent: build/agents/agent_main.o $(AGENT_LIB) $(COMMON_LIB) $(PIV_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(ZMQ_LIBS) $(PIV_LIBS)

PROGRAMS += bin/pivfarm-agent
