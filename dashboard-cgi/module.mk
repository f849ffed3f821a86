# dashboard-cgi/ — pivfarm.cgi, the status page (a CGI program).
# The configuration it reads when PIVFARM_CONF is not set (the web server
# usually sets it): make DASHBOARD_CONF=/path/to/pivfarm.conf
DASHBOARD_CONF ?= /etc/pivfarm/pivfarm.conf
DASHBOARD_OBJS := build/dashboard-cgi/dashboard.o build/dashboard-cgi/gather.o \
                  build/dashboard-cgi/html.o build/dashboard-cgi/json_out.o \
                  build/dashboard-cgi/esc.o build/dashboard-cgi/query.o \
                  build/dashboard-cgi/prometheus.o build/dashboard-cgi/measure.o \
                  build/dashboard-cgi/maps.o build/dashboard-cgi/ensemble_card.o
build/dashboard-cgi/%.o: LAYER_PKGS := $(ZMQ_PKGS)

build/dashboard-cgi/dashboard.o: ALL_CFLAGS += -DDASHBOARD_CONF='"$(DASHBOARD_CONF)"'

bin/pivfarm.cgi: $(DASHBOARD_OBJS) $(STORE_LIB) $(COMMON_LIB) $(PIV_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(ZMQ_LIBS) $(STORE_LIBS) $(PIV_LIBS)

PROGRAMS += bin/pivfarm.cgi
