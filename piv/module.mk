# piv/ — libpiv, the PIV science core (TIFF in, vectors out), and its programs.
PIV_OBJS := build/piv/image.o build/piv/image_save.o build/piv/field.o build/piv/validate.o \
            build/piv/settings.o build/piv/piv.o build/piv/deform.o build/piv/flow.o \
            build/piv/synth.o build/piv/image_samples.o build/piv/calib.o build/piv/derived.o \
            build/piv/stats.o build/piv/vtk.o build/piv/smooth.o build/piv/budget.o \
            build/piv/sparse.o \
            build/piv/prefilter.o build/piv/preprocess.o build/piv/background.o \
            build/piv/camera.o build/piv/cameras.o build/piv/dots.o \
             build/piv/stereo.o build/piv/synth_stereo.o build/piv/selfcal.o \
             build/piv/uncertainty.o build/piv/ensemble.o
PIV_LIB  := build/libpiv.a
LIBS += $(PIV_LIB)
# FFTW, libtiff and GSL only: no ZeroMQ, no SQLite (see LAYER_PKGS in the Makefile).
build/piv/%.o: LAYER_PKGS := $(PIV_PKGS)
# The calibration points' reader alone knows libxml2 (the XML of case E);
# it is not in libpiv: what reads points links it (pivfarm-calib,
# tests/test_camera).
build/piv/points.o: LAYER_PKGS := $(PIV_PKGS) $(XML_PKGS)

$(PIV_LIB): $(PIV_OBJS)
	rm -f $@ && $(AR) rcs $@ $^

bin/pivfarm-piv: build/piv/piv_main.o $(PIV_LIB) $(COMMON_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(PIV_LIBS)

bin/pivfarm-synth: build/piv/synth_main.o $(PIV_LIB) $(COMMON_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(PIV_LIBS)

bin/pivfarm-calib: build/piv/camera_main.o build/piv/points.o $(PIV_LIB) $(COMMON_LIB)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(PIV_LIBS) $(XML_LIBS)

PROGRAMS += bin/pivfarm-piv bin/pivfarm-synth bin/pivfarm-calib
