// test_export.c — pivctl's files in physical units: export to txt, VTK and
// HDF5 and pivctl stats, over real SQLite stores filled with known fields
// (a solid rotation and a uniform flow, calibrated 0.02 mm/px, dt 2 ms),
// read back by real readers: h5dump, python3 h5py and python3 vtk.

#include "piv/calib.h"
#include "piv/derived.h"
#include "piv/field.h"
#include "piv/image.h"
#include "piv/stats.h"
#include "common/jdoc.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <czmq.h>

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define T0 1700000000000000000LL   // the first camera time, ns
#define GAP 100000000LL            // between pairs: 100 ms
#define OMEGA 0.01                 // the rotation, rad per frame pair
#define CALIB "scale=2e-05m/px dt=0.002s origin=0,0 y_axis=up" // 0.02 mm/px, 2 ms
#define STEP 16

static tu_farm_t s_farm;
static char s_db[4096];
static int s_marked; // s_fill_as: vector (3, 2) REPLACED and (5, 4) INVALID in every field

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
    tu_farm_conf (&s_farm, "noop", 1, "32,16", "");
    snprintf (s_db, sizeof s_db, "%s", tu_path (s_farm.dir, "farm.db"));
}

static void
s_teardown (void)
{
    s_marked = 0;
    tu_farm_release (&s_farm);
}

// nx x nx vectors, STEP apart from (STEP, STEP): the solid rotation about
// the grid's centre u = -w (y - c), v = w (x - c) px per frame pair (y
// down), plus (u0, v0).
static piv_field_t *
s_field (int nx, double w, double u0, double v0)
{
    piv_field_t *f = piv_field_new (nx, nx);
    ck_assert_ptr_nonnull (f);
    f->window = 2 * STEP;
    f->step = STEP;
    f->runs = 1;
    double c = STEP + STEP * (nx - 1) / 2.0;
    for (int j = 0; j < nx; j++)
        for (int i = 0; i < nx; i++) {
            int k = j * nx + i;
            f->x[k] = (float)(STEP + STEP * i);
            f->y[k] = (float)(STEP + STEP * j);
            f->u[k] = (float)(u0 - w * (f->y[k] - c));
            f->v[k] = (float)(v0 + w * (f->x[k] - c));
            f->peak_ratio[k] = 2.0f;
            f->flags[k] = PIV_FLAG_VALID;
        }
    return f;
}

// Adds pairs 'stem' (a printf pattern of i) for i = first .. first + n - 1
// of 'exp' to the store, each with a result on an nx grid (rotation w), the
// camera closing frame B at T0 + i GAP and the result recorded 50 ms later;
// 'calib' (may be NULL) set as the experiment's calibration just before the
// first.
static void
s_fill_as (const char *exp, const char *pattern, int first, int n, int nx, double w,
           const char *calib)
{
    char err[512];
    store_t *store = store_new (s_db, STORE_DURABILITY_NORMAL, err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    int64_t t = T0 + first * GAP;
    int64_t e = store_experiment (store, exp, t - 1);
    ck_assert (e > 0);
    if (calib)
        ck_assert_int_eq (store_setting_set (store, e, "calibration", calib, t - 1), 0);
    piv_field_t *f = s_field (nx, w, 0, 0);
    if (s_marked) {
        f->flags[2 * nx + 3] = PIV_FLAG_REPLACED;
        f->flags[4 * nx + 5] = PIV_FLAG_INVALID;
        f->u[4 * nx + 5] = f->v[4 * nx + 5] = 0; // as an agent writes it
    }
    unsigned char *blob;
    size_t size;
    ck_assert_int_eq (piv_field_encode (f, &blob, &size), 0);
    for (int i = first; i < first + n; i++) {
        t = T0 + i * GAP;
        char a[128], b[128], stem[64];
        snprintf (stem, sizeof stem, pattern, i);
        snprintf (a, sizeof a, "%s_a.tif", stem);
        snprintf (b, sizeof b, "%s_b.tif", stem);
        int version, is_new, recorded;
        int64_t fa = store_file_add (store, e, a, 100, t - 1000, t, &version);
        int64_t fb = store_file_add (store, e, b, 100, t, t, &version);
        int64_t pair = store_pair_add (store, e, stem, fa, fb, t, &is_new);
        int attempt = store_pair_dispatch (store, pair, "a1", t + 1);
        store_result_t r = {.nx = nx, .ny = nx, .field = blob, .field_size = size, .path = ""};
        ck_assert_int_eq (store_pair_result (store, pair, attempt, "a1", &r, t + GAP / 2, &recorded),
                          0);
        ck_assert_int_eq (recorded, 1);
    }
    ck_assert_int_eq (store_commit (store, err, sizeof err), 0);
    free (blob);
    piv_field_destroy (&f);
    store_destroy (&store);
}

// s_fill_as of pairs p<first> .. p<first + n - 1>.
static void
s_fill (const char *exp, int first, int n, int nx, double w, const char *calib)
{
    s_fill_as (exp, "p%04d", first, n, nx, w, calib);
}

// Runs pivctl -c CONF --timeout 300 with the arguments (NULL-ended).
static int
s_pivctl (char *out, size_t len, const char *first, ...)
{
    char *argv[32] = {(char *)tu_bin ("pivctl"), "-c", s_farm.conf, "--timeout", "300"};
    int n = 5;
    va_list ap;
    va_start (ap, first);
    for (const char *a = first; a && n < 31; a = va_arg (ap, const char *))
        argv[n++] = (char *)a;
    va_end (ap);
    argv[n] = NULL;
    return tu_run (argv, out, len, 120);
}

// Runs a python3 script given as text with up to three arguments (the
// first NULL ends them); its output in out.
static int
s_python3 (const char *script, char *out, size_t len, const char *arg1, const char *arg2,
           const char *arg3)
{
    const char *path = tu_path (s_farm.dir, "check.py");
    tu_spit (path, script, strlen (script));
    char *argv[] = {"/usr/bin/python3", (char *)path, (char *)arg1, (char *)arg2, (char *)arg3,
                    NULL};
    return tu_run (argv, out, len, 120);
}

static int
s_python (const char *script, char *out, size_t len, const char *arg1, const char *arg2)
{
    return s_python3 (script, out, len, arg1, arg2, NULL);
}

// ---------------------------------------------------------------------------
// HDF5

static const char *s_h5_check =
    "import sys, h5py, numpy as np\n"
    "si = h5py.File(sys.argv[1], 'r'); px = h5py.File(sys.argv[2], 'r')\n"
    "for name in ('u', 'v', 'vorticity', 'flags', 'peak_ratio'):\n"
    "    assert si[name].shape == (6, 16, 16), (name, si[name].shape)\n"
    "    assert si[name].chunks == (1, 16, 16), (name, si[name].chunks)\n"
    "    assert si[name].compression == 'gzip' and si[name].shuffle, name\n"
    "assert si['x'].shape == (16,) and si['y'].shape == (16,)\n"
    "assert si['flags'].dtype == np.uint8\n"
    "assert si['u'].attrs['units'] == 'm/s' and px['u'].attrs['units'] == 'px/frame'\n"
    "assert si['x'].attrs['units'] == 'm' and si['vorticity'].attrs['units'] == '1/s'\n"
    "k = 2e-5 / 2e-3\n"
    "assert np.allclose(si['u'][...], px['u'][...] * k, rtol=1e-5, atol=1e-9)\n"
    "assert np.allclose(si['v'][...], -px['v'][...] * k, rtol=1e-5, atol=1e-9)  # y up\n"
    "assert np.allclose(si['x'][...], px['x'][...] * 2e-5)\n"
    "assert np.allclose(si['y'][...], -px['y'][...] * 2e-5)\n"
    "exact = -2 * 0.01 / 2e-3  # 2 Omega in 1/s, negative with y up\n"
    "w = si['vorticity'][...]; fin = w[np.isfinite(w)]\n"
    "assert fin.size > 0.5 * w.size, fin.size\n"
    "assert abs(fin.mean() / exact - 1) < 0.02, (fin.mean(), exact)\n"
    "assert np.allclose(si['time'][...], [0, .1, .2, .3, .4, .5]), si['time'][...]\n"
    "assert si['time'].attrs['units'] == 's'\n"
    "stems = [s.decode() if isinstance(s, bytes) else s for s in si['pair'][...]]\n"
    "assert stems == ['p%04d' % i for i in range(6)], stems\n"
    "assert si.attrs['calibration'].startswith('scale=0.02mm/px dt=2ms'), si.attrs['calibration']\n"
    "assert si.attrs['scale_m_per_px'] == 2e-5 and si.attrs['dt_s'] == 2e-3\n"
    "assert si.attrs['y_axis'] == 'up' and si.attrs['pivfarm_version']\n"
    "assert 'passes=' in si.attrs['piv_settings']\n"
    "st = si['stats']\n"
    "assert int(st.attrs['fields']) == 6 and st.attrs['valid_fraction'] == 1\n"
    "for name in ('u_mean', 'v_mean', 'u_rms', 'v_rms', 'uv_mean', 'vorticity_mean', "
    "'count'):\n"
    "    assert st[name].shape == (16, 16), (name, st[name].shape)\n"
    "assert (st['count'][...] == 6).all()\n"
    "assert np.allclose(st['u_mean'][...], si['u'][0], rtol=1e-5, atol=1e-9)\n"
    "assert np.allclose(st['v_mean'][...], si['v'][0], rtol=1e-5, atol=1e-9)\n"
    "assert np.nanmax(np.abs(st['u_rms'][...])) < 1e-6\n"
    "assert abs(np.nanmean(st['vorticity_mean'][...]) / exact - 1) < 0.02\n"
    "assert st['u_mean'].attrs['units'] == 'm/s'\n"
    "assert st['vorticity_mean'].attrs['units'] == '1/s'\n"
    "# the example of doc/units.md, section Files\n"
    "with h5py.File(sys.argv[1]) as f:\n"
    "    u, v, w = f['u'], f['v'], f['vorticity']\n"
    "    print(f.attrs['calibration_description'], u.attrs['units'], u.shape)\n"
    "    print(np.nanmean(w[-1]), f['time'][-1], f['pair'][-1].decode(), "
    "f['stats/u_mean'][...].max())\n"
    "print('ok')\n";

START_TEST (hdf5_export_reads_back_in_si_units_with_h5py_and_h5dump)
{
    s_fill ("rot", 0, 6, 16, OMEGA, CALIB);
    char out[1 << 16], si[4096], px[4096];
    snprintf (si, sizeof si, "%s", tu_path (s_farm.dir, "out/rot.h5"));
    snprintf (px, sizeof px, "%s", tu_path (s_farm.dir, "out/rot_px.h5"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "--format", "hdf5", "-o", si,
                                NULL),
                      0);
    ck_assert_msg (strstr (out, "exported 6 field(s) of rot") && strstr (out, "in si units"), "%s",
                   out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "--format=hdf5", "--units",
                                "px", "-o", px, NULL),
                      0);
    ck_assert_int_eq (tu_entries (tu_path (s_farm.dir, "out")), 2); // no temporary left
    int rc = s_python (s_h5_check, out, sizeof out, si, px);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);

    // h5dump, HDF5's own reader: the attributes state units and calibration.
    char *argv[] = {"/usr/bin/h5dump", "-A", si, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 60), 0);
    const char *expect[] = {"pivfarm_version", "\"m/s\"", "\"1/s\"", "calibration_description",
                            "0.02 mm/px", "GROUP \"stats\"", "valid_fraction"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg (strstr (out, expect[i]), "h5dump -A lacks %s:\n%.3000s", expect[i], out);
}
END_TEST

static void s_epoch (const char *exp, int64_t ts);

// xarray (h5netcdf) opens the export as a scientist would, in one line:
// labelled x, y, time coordinates on every field dataset (x and y apart on
// a square grid), units and long_name everywhere, the derived quantities,
// and the statistics group with the mean defined where vectors were
// replaced and the counts of each kind.
static const char *s_xarray_check =
    "import sys, numpy as np, xarray as xr\n"
    "ds = xr.open_dataset(sys.argv[1], engine='h5netcdf')\n"
    "names = ('u', 'v', 'vorticity', 'divergence', 'speed', 'flags', 'peak_ratio')\n"
    "for name in names:\n"
    "    assert ds[name].dims == ('time', 'y', 'x'), (name, ds[name].dims)\n"
    "for name in names + ('x', 'y', 'time', 'pair'):\n"
    "    assert ds[name].attrs['long_name'], name\n"
    "    assert name == 'pair' or ds[name].attrs['units'], name\n"
    "assert ds.u.attrs['units'] == 'm/s' and ds.speed.attrs['units'] == 'm/s'\n"
    "assert ds.divergence.attrs['units'] == '1/s' and ds.x.attrs['units'] == 'm'\n"
    "assert ds.sizes['x'] == 16 and ds.sizes['y'] == 16 and ds.sizes['time'] == 6, ds.sizes\n"
    "assert np.allclose(ds.time, [0, .1, .2, .3, .4, .5]) and ds.pair.dims == ('time',)\n"
    "K, c = 2e-5 / 2e-3, 16 + 16 * 15 / 2.0  # (m/s) per (px/frame), the rotation's centre\n"
    "# a labelled selection: x = 48 px, y = 32 px (y up: negative) in the 4th field\n"
    "p = ds.sel(x=48 * 2e-5, y=-32 * 2e-5, method='nearest').isel(time=3)\n"
    "assert abs(p.u - (-0.01 * (32 - c) * K)) < 1e-7 and abs(p.v - (-0.01 * (48 - c) * K)) < 1e-7\n"
    "hole = ds.flags == 2\n"
    "assert int(hole.sum()) == 6 and bool(ds.speed.where(hole).isnull().all())\n"
    "ok = ~hole\n"
    "assert np.allclose(ds.speed.where(ok), np.hypot(ds.u, ds.v).where(ok), rtol=1e-5, equal_nan=True)\n"
    "w = ds.vorticity.where(ok); assert int(w.notnull().sum()) == 6 * (256 - 1), int(w.notnull().sum())\n"
    "assert float(abs(w / (-2 * 0.01 / 2e-3) - 1).max()) < 1e-4  # up to the border\n"
    "assert float(abs(ds.divergence.where(ok)).max()) < 1e-3\n"
    "st = xr.open_dataset(sys.argv[1], engine='h5netcdf', group='stats')\n"
    "for name in ('u_mean', 'v_mean', 'count', 'n_valid', 'n_replaced'):\n"
    "    assert st[name].dims == ('y', 'x') and st[name].attrs['long_name'], name\n"
    "r = st.isel(x=3, y=2); h = st.isel(x=5, y=4)\n"
    "assert int(r.n_replaced) == 6 and int(r.n_valid) == 0 and int(r['count']) == 6\n"
    "assert np.isfinite(float(r.u_mean)) and int(h['count']) == 0 and np.isnan(float(h.u_mean))\n"
    "assert int(st.n_valid.sum()) == 6 * (256 - 2)\n"
    "print('ok', ds.sizes, float(p.u))\n";

START_TEST (hdf5_export_opens_in_xarray_with_labelled_coordinates)
{
    s_marked = 1;
    s_fill ("rot", 0, 6, 16, OMEGA, CALIB);
    char out[1 << 16], file[4096];
    snprintf (file, sizeof file, "%s", tu_path (s_farm.dir, "rot.h5"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-f", "hdf5", "-o", file, NULL),
                      0);
    int rc = s_python (s_xarray_check, out, sizeof out, file, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "xarray: %s", out);
    // netCDF-C, the library of netCDF4-python and ncdump: named dimensions,
    // no phony_dim_*, x and y apart on this square grid.
    char *argv[] = {"/usr/bin/ncdump", "-h", file, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 60), 0);
    const char *expect[] = {"time = UNLIMITED ; // (6 currently)", "y = 16 ;", "x = 16 ;",
                            "float u(time, y, x) ;", "float divergence(time, y, x) ;",
                            "u:long_name = ", "group: stats {", "int64 n_replaced(y, x) ;"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg (strstr (out, expect[i]), "ncdump -h lacks '%s':\n%.4000s", expect[i], out);
    ck_assert_msg (!strstr (out, "phony_dim"), "%.4000s", out);
}
END_TEST

// scipy.io.loadmat reads the .mat export: 3-D arrays [ny nx nt] whose
// values are those of the txt export of the same fields, column by column
// (to the txt's 7 digits), and the statistics as a struct.
static const char *s_mat_check =
    "import sys, os, numpy as np, scipy.io\n"
    "m = scipy.io.loadmat(sys.argv[1])\n"
    "u = m['u']; ny, nx, nt = u.shape; assert (ny, nx, nt) == (16, 16, 6), u.shape\n"
    "assert m['x'].shape == (1, 16) and m['y'].shape == (16, 1) and m['time'].shape == (6, 1)\n"
    "assert m['flags'].dtype == np.uint8 and u.dtype == np.float32\n"
    "stems = [str(p[0][0]) for p in m['pair']]; assert stems == ['p%04d' % i for i in range(6)]\n"
    "units = m['units'][0, 0]; assert str(units['u'][0]) == 'm/s' and str(units['x'][0]) == 'm'\n"
    "assert str(m['calibration'][0]).startswith('scale=0.02mm/px')\n"
    "names = ('u', 'v', 'flags', 'peak_ratio', 'vorticity', 'divergence', 'speed')\n"
    "for t, stem in enumerate(stems):\n"
    "    txt = np.loadtxt(os.path.join(sys.argv[2], stem + '.txt'))  # x y u v flags peak w d s\n"
    "    assert txt.shape == (256, 9), txt.shape\n"
    "    X, Y = np.meshgrid(m['x'][0], m['y'][:, 0])\n"
    "    assert np.allclose(txt[:, 0], X.ravel(), atol=1e-6) and np.allclose(txt[:, 1], Y.ravel(), atol=1e-6)\n"
    "    for col, name in enumerate(names):\n"
    "        a = m[name][:, :, t].astype(float).ravel(); b = txt[:, col + 2]\n"
    "        tol = 2e-6 * np.nanmax(abs(b))  # 7 digits in the txt\n"
    "        assert np.array_equal(np.isnan(a), np.isnan(b)), name\n"
    "        assert np.nanmax(abs(a - b)) <= tol, (name, np.nanmax(abs(a - b)))\n"
    "st = m['stats'][0, 0]  # the statistics: [ny nx] figures, mean defined where replaced\n"
    "assert st['u_mean'].shape == (16, 16) and str(st['units'][0, 0]['u_mean'][0]) == 'm/s'\n"
    "assert st['n_replaced'][2, 3] == 6 and st['n_valid'][2, 3] == 0 and st['count'][4, 5] == 0\n"
    "assert np.isnan(st['u_mean'][4, 5]) and int(st['fields'][0, 0]) == 6\n"
    "keep = np.ones((16, 16), bool); keep[4, 5] = False\n"
    "assert np.allclose(st['u_mean'][keep], u[:, :, 0][keep], rtol=1e-6)\n"
    "assert np.allclose(st['x'], m['x']) and np.allclose(st['y'], m['y'])\n"
    "un = st['units'][0, 0]  # the uncertainty, named with its units; 6 fields: not known yet\n"
    "assert [str(un[k][0]) for k in ('u_mean_uncertainty', 'vorticity_mean_uncertainty', 'n_eff')]"
    " == ['m/s', '1/s', '1'], un\n"
    "assert np.isnan(st['n_eff']).all() and np.isnan(st['u_rms_uncertainty']).all()\n"
    "print('ok', u.shape)\n";

START_TEST (mat_export_reads_in_scipy_equal_to_the_txt_export)
{
    s_marked = 1;
    s_fill ("rot", 0, 6, 16, OMEGA, CALIB);
    char out[1 << 16], mat[4096], dir[4096];
    snprintf (mat, sizeof mat, "%s", tu_path (s_farm.dir, "rot.mat"));
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "txt"));
    int exit = s_pivctl (out, sizeof out, "export", "rot", "--format", "mat", "-o", mat, NULL);
    ck_assert_msg (exit == 0, "exit %d: %s", exit, out);
    ck_assert_msg (strstr (out, "exported 6 field(s) of rot to") && strstr (out, "si units"), "%s",
                   out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-o", dir, NULL), 0);
    int rc = s_python (s_mat_check, out, sizeof out, mat, dir);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "scipy: %s", out);
    // A second export is refused: the file is there.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-f", "mat", "-o", mat, NULL),
                      1);
    ck_assert_msg (strstr (out, mat), "%s", out);
}
END_TEST

START_TEST (hdf5_export_refuses_results_of_two_calibrations_naming_their_ranges)
{
    s_fill ("mix", 0, 3, 8, OMEGA, CALIB);
    s_epoch ("mix", T0 + 3 * GAP - 1);  // a new setup from p0003 on (calibrate --from now)
    s_fill ("mix", 3, 3, 8, OMEGA, "scale=5e-05m/px dt=0.001s origin=0,0 y_axis=up");
    char out[1 << 14], file[4096];
    snprintf (file, sizeof file, "%s", tu_path (s_farm.dir, "mix.h5"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "mix", "--format", "hdf5", "-o", file,
                                NULL),
                      1);
    ck_assert_msg (strstr (out, "different calibrations") && strstr (out, "'p0000'..'p0002'")
                       && strstr (out, "'p0003'..'p0005'") && strstr (out, "--units px"),
                   "%s", out);
    ck_assert_msg (strstr (out, "0.02 mm/px") && strstr (out, "0.05 mm/px"), "%s", out);
    ck_assert (access (file, F_OK) != 0);
    tu_entries (s_farm.dir); // no temporary left
    // In pixels the calibrations do not matter: one file.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "mix", "--format", "hdf5", "--units",
                                "px", "-o", file, NULL),
                      0);
    ck_assert (access (file, F_OK) == 0);

    // A change of grid cannot share a file in any units.
    s_fill ("grid", 0, 2, 8, OMEGA, NULL);
    s_fill ("grid", 2, 2, 10, OMEGA, NULL);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "grid", "--format", "hdf5", "-o",
                                tu_path (s_farm.dir, "grid.h5"), NULL),
                      1);
    ck_assert_msg (strstr (out, "different grids") && strstr (out, "'p0000'..'p0001' (8x8")
                       && strstr (out, "'p0002'..'p0003' (10x10"),
                   "%s", out);
}
END_TEST

// ---------------------------------------------------------------------------
// VTK and text

static const char *s_vtk_check =
    "import sys, vtk\n"
    "def read(path):\n"
    "    r = vtk.vtkStructuredGridReader(); r.SetFileName(path)\n"
    "    r.ReadAllScalarsOn(); r.ReadAllVectorsOn(); r.ReadAllFieldsOn(); r.Update()\n"
    "    g = r.GetOutput(); pd = g.GetPointData()\n"
    "    return g, {pd.GetArrayName(i): pd.GetArray(i) for i in range(pd.GetNumberOfArrays())}\n"
    "g, a = read(sys.argv[1] + '/p0003.vtk')\n"
    "assert g.GetDimensions() == (16, 16, 1), g.GetDimensions()\n"
    "assert g.GetNumberOfPoints() == 256\n"
    "assert 'velocity' in a and 'vorticity' in a, sorted(a)\n"
    "u, v, _ = a['velocity'].GetTuple3(0)  # (16, 16) px: u 1.2, v -1.2 px/frame\n"
    "assert abs(u - 0.012) < 1e-6 and abs(v - 0.012) < 1e-6, (u, v)\n"
    "x, y, _ = g.GetPoint(0)\n"
    "assert abs(x - 16 * 2e-5) < 1e-9 and abs(y + 16 * 2e-5) < 1e-9, (x, y)\n"
    "w = a['vorticity'].GetTuple1(8 * 16 + 8)\n"
    "assert abs(w / -10 - 1) < 0.02, w\n"
    "g, a = read(sys.argv[1] + '/stats.vtk')\n"
    "assert g.GetDimensions() == (16, 16, 1), g.GetDimensions()\n"
    "assert len(a) >= 5, sorted(a)\n"
    "print('ok', sorted(a))\n";

START_TEST (vtk_export_opens_in_vtk_with_the_statistics_file)
{
    s_fill ("rot", 0, 6, 16, OMEGA, CALIB);
    char out[1 << 14], dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "vtk"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "--format", "vtk", "-o", dir,
                                NULL),
                      0);
    ck_assert_msg (strstr (out, "exported 6 field(s)"), "%s", out);
    int rc = s_python (s_vtk_check, out, sizeof out, dir, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "vtk: %s", out);
}
END_TEST

// The first vector of DIR/p0000.txt and the file's text.
static char *
s_first_vector (const char *dir, double *u, double *v)
{
    char path[4200], err[512];
    snprintf (path, sizeof path, "%s/p0000.txt", dir);
    piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    *u = f->u[0];
    *v = f->v[0];
    piv_field_destroy (&f);
    char *text = tu_slurp (path, NULL);
    ck_assert_ptr_nonnull (text);
    return text;
}

START_TEST (txt_export_converts_with_the_calibration_and_says_so)
{
    s_fill ("rot", 0, 2, 16, OMEGA, CALIB);
    char out[1 << 14], si[4096], px[4096];
    snprintf (si, sizeof si, "%s", tu_path (s_farm.dir, "si"));
    snprintf (px, sizeof px, "%s", tu_path (s_farm.dir, "px"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-o", si, NULL), 0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "--units", "px", "-o", px, NULL),
                      0);
    double u, v;
    char *text = s_first_vector (si, &u, &v);
    ck_assert_msg (fabs (u - 0.012) < 1e-7 && fabs (v - 0.012) < 1e-7, "si: %g %g", u, v);
    ck_assert_msg (strstr (text, "# units: x, y in m; u, v in m/s")
                       && strstr (text, "# calibration: 0.02 mm/px"),
                   "%s", text);
    free (text);
    text = s_first_vector (px, &u, &v);
    ck_assert_msg (fabs (u - 1.2) < 1e-5 && fabs (v + 1.2) < 1e-5, "px: %g %g", u, v);
    ck_assert_msg (strstr (text, "u, v in px/frame") && strstr (text, "not applied (--units px)"),
                   "%s", text);
    free (text);
}
END_TEST

// Issue 23: a stem is a file's name less its suffix, as the camera gave it:
// exported under that name (its '/' as directories), whatever characters
// it holds; one whose last part is empty (frames called '_a.tif' in cam1/)
// is named by its pair rather than hidden as '.txt'; one no camera could
// have made (from a store another program wrote) is refused, the others
// still written.
START_TEST (stems_become_file_names_as_they_are_and_an_empty_one_is_named_by_its_pair)
{
    // As s_fill_as patterns: '%' doubled.
    const char *stems[] = {"run(7) a&b %%41 #1 ?q +\xc3\xa9", "cam1/", "cam2/x", "../escape"};
    for (int i = 0; i < 4; i++)
        s_fill_as ("run(7)", stems[i], 1 + i, 1, 16, OMEGA, NULL);
    char out[1 << 14], dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "out"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "run(7)", "-o", dir, NULL), 1);
    ck_assert_msg (strstr (out, "refusing to export pair 4 ('../escape') into") 
                       && strstr (out, "a '..' component"),
                   "%s", out);
    const char *files[] = {"run(7) a&b %41 #1 ?q +\xc3\xa9.txt", "cam1/pair-2.txt", "cam2/x.txt"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg (access (tu_path (dir, files[i]), F_OK) == 0, "no '%s': %s", files[i], out);
    ck_assert (access (tu_path (dir, "cam1/.txt"), F_OK) != 0);
    ck_assert (access (tu_path (s_farm.dir, "escape.txt"), F_OK) != 0);
}
END_TEST

// Records a calibration setting of 'exp' (NULL: the global default) at
// 'ts'; value NULL removes it.
static void
s_setting (const char *exp, const char *value, int64_t ts)
{
    char err[512];
    store_t *store = store_new (s_db, STORE_DURABILITY_NORMAL, err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    int64_t e = exp ? store_experiment (store, exp, ts) : 0;
    ck_assert_int_eq (store_setting_set (store, e, "calibration", value, ts), 0);
    ck_assert_int_eq (store_commit (store, err, sizeof err), 0);
    store_destroy (&store);
}

// Records the start of a calibration epoch of 'exp' at 'ts', as `calibrate
// EXP --from now` does just before its calibration.
static void
s_epoch (const char *exp, int64_t ts)
{
    char err[512], value[32];
    store_t *store = store_new (s_db, STORE_DURABILITY_NORMAL, err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    snprintf (value, sizeof value, "%lld", (long long) ts);
    ck_assert_int_eq (store_setting_set (store, store_experiment (store, exp, ts),
                                         "calibration_from", value, ts),
                      0);
    ck_assert_int_eq (store_commit (store, err, sizeof err), 0);
    store_destroy (&store);
}

START_TEST (a_calibration_applies_to_the_whole_run_up_to_a_change_from_now)
{
    const char *wide = "scale=5e-05m/px dt=0.002s origin=0,0 y_axis=up"; // 0.05 mm/px
    const char *fine = "scale=1e-05m/px dt=0.002s origin=0,0 y_axis=up"; // 0.01 mm/px
    s_setting (NULL, wide, T0 - GAP);               // the default of every experiment
    s_fill ("hist", 0, 2, 8, OMEGA, NULL);          // p0000, p0001 recorded, then
    s_setting ("hist", CALIB, T0 + 2 * GAP - 3);    // calibrated: 0.02 applies to them
    s_epoch ("hist", T0 + 2 * GAP - 2);             // the setup changes (--from now):
    s_setting ("hist", NULL, T0 + 2 * GAP - 2);     // the default from p0002 on, until
    s_fill ("hist", 2, 2, 8, OMEGA, NULL);          // p0002, p0003 recorded, then
    s_setting ("hist", fine, T0 + 4 * GAP - 1);     // calibrated: 0.01 applies to them
    s_fill ("hist", 4, 2, 8, OMEGA, NULL);          // p0004, p0005 as well
    char out[1 << 14], dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "hist"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "hist", "-o", dir, NULL), 0);
    ck_assert_msg (strstr (out, "exported 6 field(s)") && strstr (out, "si units"), "%s", out);
    static const struct {
        const char *stem, *calib;
        double k; // (m/s) per (px/frame)
    } expect[] = {{"p0000", "0.02 mm/px", 2e-5 / 2e-3},
                  {"p0003", "0.01 mm/px", 1e-5 / 2e-3},
                  {"p0005", "0.01 mm/px", 1e-5 / 2e-3}};
    for (size_t i = 0; i < 3; i++) {
        char path[4200], err[512];
        snprintf (path, sizeof path, "%s/%s.txt", dir, expect[i].stem);
        char *text = tu_slurp (path, NULL);
        ck_assert_msg (text && strstr (text, expect[i].calib), "%s: %s", path, text ? text : "");
        free (text);
        piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
        ck_assert_msg (f != NULL, "%s", err);
        double u_px = -OMEGA * (16 - (16 + 16 * 3.5)); // the first vector's
        ck_assert_msg (fabs (f->u[0] - u_px * expect[i].k) < 1e-6, "%s: u %g, expected %g",
                       expect[i].stem, f->u[0], u_px * expect[i].k);
        piv_field_destroy (&f);
    }
}
END_TEST

START_TEST (si_units_are_refused_for_an_experiment_never_calibrated)
{
    s_fill ("raw", 0, 2, 8, OMEGA, NULL);
    char out[1 << 14], dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "raw"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "raw", "--units", "si", "-o", dir, NULL),
                      1);
    ck_assert_msg (strstr (out, "'raw' is not calibrated") && strstr (out, "--units px"), "%s",
                   out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "raw", "--units", "kelvin", "-o", dir,
                                NULL),
                      2);
    // Without --units: pixels, said in the header.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "raw", "-o", dir, NULL), 0);
    ck_assert_msg (strstr (out, "in px units"), "%s", out);
    double u, v;
    char *text = s_first_vector (dir, &u, &v);
    ck_assert_msg (strstr (text, "u, v in px/frame") && strstr (text, "not calibrated"), "%s",
                   text);
    free (text);
}
END_TEST

// ---------------------------------------------------------------------------
// Memory

// The largest resident size (KiB) of pivctl exporting 'exp' to HDF5.
static long
s_export_rss (const char *exp)
{
    char file[4096];
    snprintf (file, sizeof file, "%s/%s.h5", s_farm.dir, exp);
    pid_t pid = fork ();
    ck_assert (pid >= 0);
    if (pid == 0) {
        int null = open ("/dev/null", O_WRONLY);
        dup2 (null, 1);
        dup2 (null, 2);
        execl (tu_bin ("pivctl"), "pivctl", "-c", s_farm.conf, "export", exp, "--format", "hdf5",
               "-o", file, (char *)NULL);
        _exit (127);
    }
    int status;
    struct rusage ru;
    ck_assert_int_eq (wait4 (pid, &status, 0, &ru), pid);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "export %s failed", exp);
    return ru.ru_maxrss;
}

START_TEST (hdf5_export_memory_does_not_grow_with_the_number_of_fields)
{
    s_fill ("b50", 0, 50, 128, OMEGA, CALIB);
    s_fill ("b200", 0, 200, 128, OMEGA, CALIB);
    long small = s_export_rss ("b50"), large = s_export_rss ("b200");
    // 150 more fields of 128x128 held would be some 50 MB (u, v, vorticity,
    // flags, peak ratio); streamed, the figure stays.
    fprintf (stderr, "export max RSS: 50 fields %ld KiB, 200 fields %ld KiB\n", small, large);
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer keeps freed memory in quarantine (256 MB): the
    // figure measures the sanitizer, not the export (make check-asan).
    return;
#endif
    ck_assert_msg (large < small + 8 * 1024, "50 fields: %ld KiB, 200 fields: %ld KiB", small,
                   large);
}
END_TEST

// ---------------------------------------------------------------------------
// pivctl stats, calibrate, mask

// Saves the statistics of n rotation fields (nx grid) of 'exp' as set
// 'set' (pairs first ...) as the broker's checkpoint would, under 'calib';
// each field moved by a random uniform (u, v) of standard deviation
// 'noise' px (0: n times the same field).
static void
s_checkpoint_noisy (const char *exp, const char *set, int64_t first, int n, int nx,
                    const char *calib, double noise)
{
    char err[512];
    store_t *store = store_new (s_db, STORE_DURABILITY_NORMAL, err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    int64_t e = store_experiment (store, exp, T0);
    piv_field_t *f = s_field (nx, OMEGA, 0, 0);
    piv_stats_t *stats = piv_stats_new (f);
    float *w = malloc ((size_t)nx * nx * sizeof *w);
    ck_assert (stats && w && piv_field_derive (f, &(piv_derived_t){.vorticity = w}) > 0);
    uint64_t seed = 3;
    for (int i = 0; i < n; i++) {
        piv_field_destroy (&f);
        f = s_field (nx, OMEGA, noise * tu_gauss (&seed), noise * tu_gauss (&seed));
        ck_assert_int_eq (piv_stats_add (stats, f, w), 0);
    }
    unsigned char *state;
    size_t size;
    ck_assert_int_eq (piv_stats_encode (stats, &state, &size), 0);
    store_stats_t row = {.experiment = e,
                         .set = set,
                         .settings = "passes=32,16 overlap=50 iterations=1",
                         .calibration = calib,
                         .fields = n,
                         .first_pair = first,
                         .last_pair = first + n - 1,
                         .state = state,
                         .state_size = size};
    ck_assert_int_eq (store_stats_save (store, &row, NULL, 0, T0), 0);
    ck_assert_int_eq (store_commit (store, err, sizeof err), 0);
    store_destroy (&store);
    free (state);
    free (w);
    piv_stats_destroy (&stats);
    piv_field_destroy (&f);
}

static void
s_checkpoint (const char *exp, const char *set, int64_t first, int n, int nx, const char *calib)
{
    s_checkpoint_noisy (exp, set, first, n, nx, calib, 0);
}

static const char *s_stats_h5_check =
    "import sys, h5py, numpy as np\n"
    "f = h5py.File(sys.argv[1], 'r')\n"
    "st = f['stats/1']\n"
    "assert st['u_mean'].shape == (16, 16) and int(st.attrs['fields']) == 6\n"
    "assert st['u_mean'].attrs['units'] == 'm/s'\n"
    "assert abs(st['u_mean'][0, 0] - 0.012) < 1e-7, st['u_mean'][0, 0]\n"
    "assert abs(np.nanmean(st['vorticity_mean'][...]) / -10 - 1) < 0.02\n"
    "assert 'passes=32,16' in st.attrs['piv_settings']\n"
    "print('ok')\n";

// pivctl stats EXP --format hdf5 into the farm's stats.h5 (its path in
// file), then 'check' (h5py, the file as argv[1]) must print "ok".
static void
s_stats_h5_checked (const char *exp, const char *check, char *file, size_t size)
{
    char out[1 << 16];
    snprintf (file, size, "%s", tu_path (s_farm.dir, "stats.h5"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", exp, "--format", "hdf5", "-o", file,
                                NULL),
                      0);
    int rc = s_python (check, out, sizeof out, file, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);
}

START_TEST (stats_reads_the_last_checkpoint_when_the_broker_is_away)
{
    s_fill ("rot", 0, 6, 16, OMEGA, CALIB);
    s_checkpoint ("rot", "16x16 step 16 window 32", 1, 6, 16, CALIB);
    char out[1 << 16];
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "rot", NULL), 0);
    ck_assert_msg (strstr (out, "no checkpoint from the broker"), "%s", out);
    ck_assert_msg (strstr (out, "set 1 of 1") && strstr (out, "0.02 mm/px")
                       && strstr (out, "m/s") && strstr (out, "passes=32,16"),
                   "%s", out);
    // The first point: x y u_mean v_mean u_rms v_rms uv_mean count.
    double x, y, um, vm, ur, vr, uv;
    long count;
    const char *line = out;
    while ((line = strchr (line, '\n')) && (line[1] == '#' || line[1] == 'p'))
        line++;
    ck_assert_ptr_nonnull (line);
    ck_assert_msg (sscanf (line + 1, "%lf %lf %lf %lf %lf %lf %lf %ld", &x, &y, &um, &vm, &ur, &vr,
                           &uv, &count)
                       == 8,
                   "%s", line);
    ck_assert_msg (fabs (um - 0.012) < 1e-7 && fabs (vm - 0.012) < 1e-7 && count == 6, "%s",
                   line);

    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "rot", "--json", NULL), 0);
    ck_assert_msg (strstr (out, "\"fields\":6") && strstr (out, "\"units\":\"si\"")
                       && strstr (out, "\"source\":\"store\"")
                       && strstr (out, "\"valid_fraction\":1"),
                   "%s", out);

    char file[4096];
    s_stats_h5_checked ("rot", s_stats_h5_check, file, sizeof file);

    // A second set (settings changed mid-run): one file each, named.
    s_checkpoint ("rot", "8x8 step 16 window 32", 7, 3, 8, "none");
    snprintf (file, sizeof file, "%s", tu_path (s_farm.dir, "out/s.txt"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "rot", "-o", file, NULL), 0);
    ck_assert_msg (strstr (out, "2 set(s) written"), "%s", out);
    char *one = tu_slurp (tu_path (s_farm.dir, "out/s-1.txt"), NULL);
    char *two = tu_slurp (tu_path (s_farm.dir, "out/s-2.txt"), NULL);
    ck_assert_msg (one && strstr (one, "set 1 of 2: 16x16 step 16 window 32")
                       && strstr (one, "m/s"),
                   "%s", one ? one : "(none)");
    ck_assert_msg (two && strstr (two, "set 2 of 2: 8x8 step 16 window 32")
                       && strstr (two, "px/frame") && !strstr (two, "m/s"),
                   "%s", two ? two : "(none)");
    free (one);
    free (two);
}
END_TEST

// The uncertainty of the statistics in every file, in the calibration's
// units: 200 fields whose mean flow moves by 0.1 px (independently from
// field to field) give u_mean_uncertainty about 0.1 px / sqrt (200) in m/s
// (n_eff is one estimate from 200 samples: 150 with this seed).
static const char *s_stats_uncertainty_check =
    "import sys, h5py, numpy as np\n"
    "st = h5py.File(sys.argv[1], 'r')['stats/1']\n"
    "K = 2e-5 / 2e-3  # (m/s) per (px/frame)\n"
    "units = {k: st[k].attrs['units'] for k in ('u_mean_uncertainty', 'v_rms_uncertainty',"
    " 'vorticity_mean_uncertainty', 'n_eff', 'sigma_u_rms')}\n"
    "assert units == {'u_mean_uncertainty': 'm/s', 'v_rms_uncertainty': 'm/s',"
    " 'vorticity_mean_uncertainty': '1/s', 'n_eff': '1', 'sigma_u_rms': 'm/s'}, units\n"
    "n = st['n_eff'][...]\n"
    "assert (n > 100).all() and (n <= 200).all(), (n.min(), n.max())  # one estimate of 200\n"
    "um = st['u_mean_uncertainty'][...] / K\n"
    "assert abs(np.median(um) / (0.1 / np.sqrt(200)) - 1) < 0.3, np.median(um)\n"
    "assert (st['vorticity_mean_uncertainty'][...] < 1e-3).all()  # a rotation that never changes\n"
    "assert np.isnan(st['sigma_u_rms'][...]).all()  # no field carried sigma\n"
    "known = float(st.attrs['mean_uncertainty'])  # m/s: RMS of sqrt(su^2 + sv^2)\n"
    "assert abs(known / np.sqrt(np.mean(um ** 2 + (st['v_mean_uncertainty'][...] / K) ** 2)) / K"
    " - 1) < 1e-6, known\n"
    "print('ok', np.median(um), n.mean())\n";

START_TEST (stats_files_carry_the_uncertainty_in_the_calibrations_units)
{
    s_fill ("rot", 0, 2, 16, OMEGA, CALIB);
    s_checkpoint_noisy ("rot", "16x16 step 16 window 32", 1, 200, 16, CALIB, 0.1);
    char out[1 << 16], file[4096];
    s_stats_h5_checked ("rot", s_stats_uncertainty_check, file, sizeof file);
    // The text: the columns named, their units stated; how well the mean
    // is known (0.1 px / sqrt (150) in u and in v: 1.15e-4 m/s).
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "rot", NULL), 0);
    const char *known = strstr (out, "mean velocity known to ");
    ck_assert_msg (known != NULL, "%s", out);
    double within = strtod (known + strlen ("mean velocity known to "), NULL);
    ck_assert_msg (within > 0.8e-4 && within < 1.5e-4 && strstr (known, " m/s (RMS"), "%.200s",
                   known);
    ck_assert_msg (strstr (out, "# units: u_mean_uncertainty m/s, v_mean_uncertainty m/s,")
                       && strstr (out, "vorticity_mean_uncertainty 1/s,")
                       && strstr (out, " n_replaced u_mean_uncertainty v_mean_uncertainty "),
                   "%s", out);
}
END_TEST

START_TEST (calibrate_and_mask_check_their_arguments_before_asking)
{
    char out[1 << 14];
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "../x", "--scale", "1mm/px", NULL),
                      2);
    ck_assert_msg (strstr (out, "calibrate: bad experiment"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "run9", "--scale", "-1 mm/px", NULL),
                      2);
    ck_assert_msg (strstr (out, "scale") && strstr (out, "mm/px"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "run9", "--dt", "abc", NULL), 2);
    ck_assert_msg (strstr (out, "dt"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "run9", "--clear", "--dt", "1ms",
                                NULL),
                      2);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "mask", "run9", "/no/such/mask.tif", NULL), 2);
    ck_assert_msg (strstr (out, "/no/such/mask.tif"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "mask", "run9", NULL), 2);
    // Good values go to the broker, here away: it did not answer.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "run9", "--scale", "0.05 mm/px",
                                "--dt", "2 ms", NULL),
                      1);
    ck_assert_msg (strstr (out, "did not answer"), "%s", out);
}
END_TEST

// ---------------------------------------------------------------------------
// Files already there (tests/badinput/README.md, "Files pivctl writes"): a
// link planted at a destination is never followed, a file is never
// overwritten without --force, every destination is checked before the
// first file is written, and no temporary is left behind

#define VICTIM "the victim's own bytes\n" // what a planted link points to

// The victim: a file outside every export, which a planted link points to.
static void
s_victim (char *path, size_t size)
{
    snprintf (path, size, "%s/victim", s_farm.dir);
    tu_spit (path, VICTIM, strlen (VICTIM));
}

// Asserts that the victim holds its own bytes, byte for byte.
static void
s_victim_unchanged (const char *path)
{
    size_t len;
    char *bytes = tu_slurp (path, &len);
    ck_assert_msg (bytes && len == strlen (VICTIM) && memcmp (bytes, VICTIM, len) == 0,
                   "the victim '%s' changed: %.200s", path, bytes ? bytes : "(gone)");
    free (bytes);
}

// Asserts that 'path' is a regular file (no link) holding 'magic'.
static void
s_written (const char *path, const char *magic)
{
    struct stat st;
    ck_assert_msg (lstat (path, &st) == 0 && S_ISREG (st.st_mode), "'%s' is no regular file",
                   path);
    size_t len;
    char *bytes = tu_slurp (path, &len);
    ck_assert_msg (bytes && memmem (bytes, len, magic, strlen (magic)), "'%s' is not the export",
                   path);
    free (bytes);
}

// Asserts that 'path' still holds "mine\n", the file that was there.
static void
s_mine_unchanged (const char *path)
{
    struct stat st;
    char *mine = tu_slurp (path, NULL);
    ck_assert_msg (lstat (path, &st) == 0 && S_ISREG (st.st_mode) && mine
                       && strcmp (mine, "mine\n") == 0,
                   "'%s' changed: %s", path, mine ? mine : "(gone)");
    free (mine);
}

// One kind of file pivctl writes, the command that writes it (-o and
// --force added) and the destination a link is planted at.
typedef struct {
    const char *args[8]; // the command line after pivctl's options (NULL-ended)
    int to_file;         // -o names the file, else its directory
    const char *name;    // the destination, in that directory
    const char *magic;   // what the file written holds
    int files;           // files the command writes into the directory
} s_dest_t;

// Runs pivctl with dest's command, -o 'to' and --force if 'force'.
static int
s_write_to (char *out, size_t len, const s_dest_t *dest, const char *to, int force)
{
    const char *a[12] = {NULL};
    int n = 0;
    for (; dest->args[n]; n++)
        a[n] = dest->args[n];
    a[n++] = "-o";
    a[n++] = to;
    a[n++] = force ? "--force" : NULL;
    return s_pivctl (out, len, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], NULL);
}

// The four cases of every destination, each in a directory of its own under
// 'tag': (a) a link to the victim at the destination: refused (exit 1,
// naming the file and the link), the victim unchanged, nothing written,
// no temporary left; (b) a file there: refused alike, unchanged; (c) with
// --force over a link: the destination is now a regular file with the
// export, the victim unchanged; (d) a fresh directory: written as ever.
static void
s_check_destination (const s_dest_t *dest, const char *tag)
{
    char victim[4096], out[1 << 14], dir[4096], path[4200], to[4200], what[256] = "";
    s_victim (victim, sizeof victim);
    for (size_t i = 0, used = 0; dest->args[i] && used < sizeof what; i++)
        used += (size_t)snprintf (what + used, sizeof what - used, "%s%s", i ? " " : "",
                                  dest->args[i]);
    snprintf (dir, sizeof dir, "%s/%s", s_farm.dir, tag);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/%s", dir, dest->name);
    snprintf (to, sizeof to, "%s", dest->to_file ? path : dir);

    ck_assert_int_eq (symlink (victim, path), 0);
    int rc = s_write_to (out, sizeof out, dest, to, 0);
    ck_assert_msg (rc == 1 && strstr (out, path) && strstr (out, "it exists (a symbolic link)")
                       && strstr (out, "nothing written") && strstr (out, "--force"),
                   "%s, a link planted: exit %d: %s", what, rc, out);
    s_victim_unchanged (victim);
    ck_assert_int_eq (tu_entries (dir), 1);

    ck_assert_int_eq (unlink (path), 0);
    tu_spit (path, "mine\n", 5);
    rc = s_write_to (out, sizeof out, dest, to, 0);
    ck_assert_msg (rc == 1 && strstr (out, path) && strstr (out, "it exists (a regular file)"),
                   "%s, a file there: exit %d: %s", what, rc, out);
    s_mine_unchanged (path);
    ck_assert_int_eq (tu_entries (dir), 1);

    ck_assert_int_eq (unlink (path), 0);
    ck_assert_int_eq (symlink (victim, path), 0);
    rc = s_write_to (out, sizeof out, dest, to, 1);
    ck_assert_msg (rc == 0, "%s --force: exit %d: %s", what, rc, out);
    s_written (path, dest->magic);
    s_victim_unchanged (victim);
    ck_assert_int_eq (tu_entries (dir), dest->files);

    snprintf (dir, sizeof dir, "%s/%s-fresh", s_farm.dir, tag);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/%s", dir, dest->name);
    snprintf (to, sizeof to, "%s", dest->to_file ? path : dir);
    rc = s_write_to (out, sizeof out, dest, to, 0);
    ck_assert_msg (rc == 0, "%s: exit %d: %s", what, rc, out);
    s_written (path, dest->magic);
    ck_assert_int_eq (tu_entries (dir), dest->files);
}

START_TEST (export_and_stats_in_every_format_never_write_through_a_link_nor_over_a_file)
{
    s_fill ("rot", 0, 3, 8, OMEGA, CALIB);
    s_checkpoint ("rot", "8x8 step 16 window 32", 0, 3, 8, CALIB);
    // stats: the broker is away, its checkpoint is not waited for long.
    static const s_dest_t dests[] = {
        {{"export", "rot", "--format", "txt", "--units", "si"}, 0, "p0001.txt", "# x y u v", 3},
        {{"export", "rot", "--format", "txt", "--units", "px"}, 0, "p0001.txt", "# x y u v", 3},
        {{"export", "rot", "--format", "tecplot"}, 0, "p0001.dat", "VARIABLES", 3},
        {{"export", "rot", "--format", "vtk", "--units", "si"}, 0, "p0001.vtk", "# vtk", 4},
        {{"export", "rot", "--format", "vtk", "--units", "px"}, 0, "stats.vtk", "# vtk", 4},
        {{"export", "rot", "--format", "hdf5", "--units", "si"}, 1, "rot.h5", "\x89HDF", 1},
        {{"export", "rot", "--format", "hdf5", "--units", "px"}, 0, "rot.h5", "\x89HDF", 1},
        {{"stats", "rot", "--format", "txt", "--timeout", "20"}, 1, "s.txt", "# x y u_mean", 1},
        {{"stats", "rot", "--format", "tecplot", "--timeout", "20"}, 1, "s.dat", "VARIABLES", 1},
        {{"stats", "rot", "--format", "vtk", "--timeout", "20"}, 1, "s.vtk", "# vtk", 1},
        {{"stats", "rot", "--format", "hdf5", "--timeout", "20"}, 1, "s.h5", "\x89HDF", 1},
    };
    for (size_t i = 0; i < sizeof dests / sizeof dests[0]; i++) {
        char tag[32];
        snprintf (tag, sizeof tag, "%s%zu", dests[i].args[0], i);
        s_check_destination (&dests[i], tag);
    }
}
END_TEST

START_TEST (a_file_in_the_way_of_any_file_refuses_before_the_first_is_written)
{
    // An export of 6 fields whose 5th name is taken writes none of them.
    s_fill ("rot", 0, 6, 8, OMEGA, CALIB);
    char out[1 << 14], dir[4096], path[4200], victim[4096];
    s_victim (victim, sizeof victim);
    snprintf (dir, sizeof dir, "%s/six", s_farm.dir);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/p0004.txt", dir);
    ck_assert_int_eq (symlink (victim, path), 0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-o", dir, NULL), 1);
    ck_assert_msg (strstr (out, path) && strstr (out, "nothing written"), "%s", out);
    ck_assert_int_eq (tu_entries (dir), 1);
    s_victim_unchanged (victim);
    // Nor is a link to a name not there yet followed to make it.
    char nowhere[4200];
    snprintf (nowhere, sizeof nowhere, "%s/made-through-a-link", s_farm.dir);
    ck_assert_int_eq (unlink (path), 0);
    ck_assert_int_eq (symlink (nowhere, path), 0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-o", dir, NULL), 1);
    ck_assert_msg (access (nowhere, F_OK) != 0, "'%s' was made through the link", nowhere);
    ck_assert_int_eq (tu_entries (dir), 1);

    // A link at the name the HDF5 export used to write through (FILE.part,
    // which its rename then put at FILE) is nothing to it now.
    snprintf (dir, sizeof dir, "%s/h5", s_farm.dir);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/rot.h5.part", dir);
    ck_assert_int_eq (symlink (victim, path), 0);
    snprintf (path, sizeof path, "%s/rot.h5", dir);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "rot", "-f", "hdf5", "-o", path, NULL),
                      0);
    s_written (path, "\x89HDF");
    s_victim_unchanged (victim);
    ck_assert_int_eq (tu_entries (dir), 2);

    // Two sets of statistics: a link at the second's file refuses both.
    s_checkpoint ("rot", "8x8 step 16 window 32", 1, 6, 8, CALIB);
    s_checkpoint ("rot", "16x16 step 16 window 32", 7, 3, 16, "none");
    snprintf (dir, sizeof dir, "%s/sets", s_farm.dir);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/s-2.txt", dir);
    ck_assert_int_eq (symlink (victim, path), 0);
    snprintf (path, sizeof path, "%s/s.txt", dir);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "rot", "--timeout", "20", "-o", path,
                                NULL),
                      1);
    ck_assert_msg (strstr (out, "s-2.txt': it exists (a symbolic link)"), "%s", out);
    ck_assert_int_eq (tu_entries (dir), 1);
    s_victim_unchanged (victim);

    // A link planted as a directory on the way of a stem (sub/p0000 under
    // DIR/sub -> elsewhere) is not followed, even with --force.
    s_fill_as ("nested", "sub/p%04d", 0, 2, 8, OMEGA, NULL);
    char elsewhere[4096];
    snprintf (elsewhere, sizeof elsewhere, "%s/elsewhere", s_farm.dir);
    ck_assert_int_eq (mkdir (elsewhere, 0755), 0);
    snprintf (dir, sizeof dir, "%s/nested", s_farm.dir);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/sub", dir);
    ck_assert_int_eq (symlink (elsewhere, path), 0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "nested", "-o", dir, "--force", NULL),
                      1);
    ck_assert_msg (strstr (out, "sub/p0000.txt") && strstr (out, "sub' on its way is a symbolic link"),
                   "%s", out);
    ck_assert_int_eq (tu_entries (elsewhere), 0);
    // Where the directory is real, the nested files are written.
    ck_assert_int_eq (unlink (path), 0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "nested", "-o", dir, NULL), 0);
    ck_assert_int_eq (tu_entries (path), 2);
}
END_TEST

// Starts 'pivctl export EXP -o dir' (output in log) and returns its pid
// once its first file (p0000.txt) is there.
static int
s_export_started (const char *exp, const char *dir, const char *log)
{
    char first[4200];
    snprintf (first, sizeof first, "%s/p0000.txt", dir);
    char *argv[] = {(char *)tu_bin ("pivctl"), "-c", s_farm.conf, "export", (char *)exp, "-o",
                    (char *)dir, NULL};
    int pid = tu_spawn (argv, log);
    for (int i = 0; i < 30000 && access (first, F_OK) != 0; i++)
        usleep (1000);
    ck_assert_msg (access (first, F_OK) == 0, "the export wrote nothing");
    return pid;
}

// Asserts that the first n fields of dir (p0000.txt ...) are whole.
static void
s_fields_whole (const char *dir, int n)
{
    for (int i = 0; i < n; i++) {
        char path[4200], err[512];
        snprintf (path, sizeof path, "%s/p%04d.txt", dir, i);
        piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
        ck_assert_msg (f && f->nx == 8 && f->ny == 8, "%s", f ? path : err);
        piv_field_destroy (&f);
    }
}

START_TEST (an_export_of_more_files_than_it_may_open_at_once_completes)
{
    // Each file let go of once in place: 300 files under a limit of 64
    // descriptors.
    s_fill ("many", 0, 300, 8, OMEGA, NULL);
    char out[1 << 14], cmd[8192];
    snprintf (cmd, sizeof cmd, "ulimit -n 64 && exec '%s' -c '%s' export many -o '%s/many'",
              tu_bin ("pivctl"), s_farm.conf, s_farm.dir);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int rc = tu_run (argv, out, sizeof out, 120);
    ck_assert_msg (rc == 0 && strstr (out, "exported 300 field(s)"), "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_entries (tu_path (s_farm.dir, "many")), 300);
}
END_TEST

START_TEST (an_export_stopped_by_sigint_leaves_whole_files_and_no_temporary)
{
    enum { FIELDS = 3000 };
    s_fill ("many", 0, FIELDS, 8, OMEGA, NULL);
    char dir[4096], log[4200];
    snprintf (dir, sizeof dir, "%s/many", s_farm.dir);
    snprintf (log, sizeof log, "%s/export.log", s_farm.dir);
    int rc = tu_stop (s_export_started ("many", dir, log), SIGINT, 60);
    char *said = tu_slurp (log, NULL);
    ck_assert_msg (rc == 1 && said && strstr (said, "interrupted"), "exit %d: %s", rc,
                   said ? said : "");
    free (said);
    int n = tu_entries (dir);
    fprintf (stderr, "SIGINT: %d of %d fields written\n", n, FIELDS);
    ck_assert_msg (n > 0 && n < FIELDS, "%d of %d files", n, FIELDS);
    s_fields_whole (dir, n);
}
END_TEST

START_TEST (a_name_taken_while_an_export_runs_stops_it_there_and_leaves_no_temporary)
{
    enum { FIELDS = 200 };
    s_fill ("many", 0, FIELDS, 8, OMEGA, NULL);
    char dir[4096], log[4200], last[4200], victim[4096];
    snprintf (dir, sizeof dir, "%s/many", s_farm.dir);
    snprintf (log, sizeof log, "%s/export.log", s_farm.dir);
    snprintf (last, sizeof last, "%s/p%04d.txt", dir, FIELDS - 1);
    s_victim (victim, sizeof victim);
    // Held still once it has begun, while a link is planted at its last name.
    int pid = s_export_started ("many", dir, log);
    ck_assert_int_eq (kill (pid, SIGSTOP), 0);
    ck_assert_int_eq (symlink (victim, last), 0);
    int rc = tu_stop (pid, SIGCONT, 60);
    char *said = tu_slurp (log, NULL);
    ck_assert_msg (rc == 1 && said && strstr (said, last)
                       && strstr (said, "it appeared while pivctl ran (a symbolic link)")
                       && strstr (said, "199 file(s) written before it are whole"),
                   "exit %d: %s", rc, said ? said : "");
    free (said);
    s_victim_unchanged (victim);
    ck_assert_int_eq (tu_entries (dir), FIELDS);
    s_fields_whole (dir, FIELDS - 1);
}
END_TEST

// ---------------------------------------------------------------------------
// End to end: a farm run of calibrated synthetic pairs

static const char *s_farm_check =
    "import sys, h5py, numpy as np\n"
    "W, OM, K = 256, 0.01, 2e-5 / 2e-3  # image, rad/frame, (m/s) per (px/frame)\n"
    "c = (W - 1) / 2.0\n"
    "f = h5py.File(sys.argv[1], 'r')\n"
    "s = h5py.File(sys.argv[2], 'r')['stats/1']\n"
    "x, y = f['x'][...] / 2e-5, -f['y'][...] / 2e-5  # back to image px\n"
    "X, Y = np.meshgrid(x, y)\n"
    "u, v = -OM * (Y - c) * K, -(OM * (X - c)) * K  # exact, m/s, y up\n"
    "inner = (abs(X - c) < 80) & (abs(Y - c) < 80)\n"
    "n = f['u'].shape[0]; assert n == 4 and int(s.attrs['fields']) == 4, (n, dict(s.attrs))\n"
    "for i in range(n):\n"
    "    ok = f['flags'][i] == 0\n"
    "    e = np.hypot(f['u'][i] - u, f['v'][i] - v)[inner & ok]\n"
    "    assert np.sqrt((e ** 2).mean()) < 0.1 * K, ('field', i, np.sqrt((e ** 2).mean()) / K)\n"
    "e = np.hypot(s['u_mean'][...] - u, s['v_mean'][...] - v)[inner]\n"
    "assert np.sqrt(np.nanmean(e ** 2)) < 0.1 * K, np.sqrt(np.nanmean(e ** 2)) / K\n"
    "exact = -2 * OM / 2e-3\n"
    "w = s['vorticity_mean'][...][inner]; w = w[np.isfinite(w)]\n"
    "assert abs(w.mean() / exact - 1) < 0.02, (w.mean(), exact)\n"
    "w = f['vorticity'][...][:, inner]; w = w[np.isfinite(w)]\n"
    "assert abs(w.mean() / exact - 1) < 0.02, (w.mean(), exact)\n"
    "# the same file in one line of xarray: labelled coordinates, the same values\n"
    "import xarray as xr, scipy.io\n"
    "ds = xr.open_dataset(sys.argv[1], engine='h5netcdf')\n"
    "assert ds.u.dims == ('time', 'y', 'x') and ds.sizes['time'] == 4, ds.u.dims\n"
    "assert np.array_equal(ds.x, f['x'][...]) and np.array_equal(ds.y, f['y'][...])\n"
    "assert ds.x.attrs['units'] == 'm' and ds.u.attrs['units'] == 'm/s'\n"
    "e = np.hypot(ds.u - u, ds.v - v).where(inner & (ds.flags == 0))\n"
    "assert float(np.sqrt((e ** 2).mean())) < 0.1 * K, float(np.sqrt((e ** 2).mean())) / K\n"
    "w = ds.vorticity.where(ds.flags == 0); assert float(abs(w.mean() / exact - 1)) < 0.05\n"
    "# the .mat of the same run: [ny nx nt], the same numbers\n"
    "m = scipy.io.loadmat(sys.argv[3])\n"
    "for name in ('u', 'v', 'vorticity', 'divergence', 'speed'):\n"
    "    assert np.allclose(np.moveaxis(m[name], 2, 0), f[name][...], equal_nan=True), name\n"
    "print('ok', s.attrs['convergence'])\n";

// A farm of the real PIV engine (passes 'passes') with 4 pairs of a solid
// rotation 0.01 rad/frame, 256 x 256, rendered as src/r_*: its broker started.
static void
s_farm_rotation (const char *passes)
{
    tu_farm_conf (&s_farm, "piv", 1, passes, "");
    char out[1 << 14], src[4096];
    snprintf (src, sizeof src, "%s/src/r", s_farm.dir);
    char *synth[] = {(char *)tu_bin ("pivfarm-synth"), "--flow", "rotation:0.01", "--size",
                     "256x256", "--count", "4", "-o", src, NULL};
    ck_assert_msg (tu_run (synth, out, sizeof out, 120) == 0, "%s", out);
    tu_farm_start_broker (&s_farm);
}

START_TEST (a_calibrated_farm_run_exports_and_counts_the_exact_flow)
{
    s_farm_rotation ("64,32");
    char out[1 << 16];
    // Calibrated before its first frame lands.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1", "--scale", "0.02 mm/px",
                                "--dt", "2 ms", NULL),
                      0);
    ck_assert_msg (strstr (out, "0.02 mm/px") && strstr (out, "m/s"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1", NULL), 0);
    ck_assert_msg (strstr (out, "calibration of exp1: 0.02 mm/px, dt 2 ms"), "%s", out);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "r", 1, 4, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 4, 120).done, 4);

    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "exp1", "--json", NULL), 0);
    ck_assert_msg (strstr (out, "\"fields\":4") && strstr (out, "\"source\":\"broker\"")
                       && strstr (out, "\"units\":\"si\""),
                   "%s", out);
    char stats[4096], file[4096];
    snprintf (stats, sizeof stats, "%s", tu_path (s_farm.dir, "stats.h5"));
    snprintf (file, sizeof file, "%s", tu_path (s_farm.dir, "exp1.h5"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "exp1", "-f", "hdf5", "-o", stats, NULL),
                      0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "exp1", "-f", "hdf5", "-o", file, NULL),
                      0);
    char mat[4096];
    snprintf (mat, sizeof mat, "%s", tu_path (s_farm.dir, "exp1.mat"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "exp1", "-f", "mat", "-o", mat, NULL),
                      0);
    int rc = s_python3 (s_farm_check, out, sizeof out, file, stats, mat);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);

    // A mask given by a roundabout path goes to the broker made absolute.
    char mask[4096], real[4096];
    snprintf (mask, sizeof mask, "%s/src/../src/r_0001_a.tif", s_farm.dir);
    ck_assert_ptr_nonnull (realpath (mask, real));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "mask", "exp1", mask, NULL), 0);
    ck_assert_msg (strstr (out, real) && strstr (out, "256 x 256 px"), "%s", out);
    char *setting = tu_farm_sql_text (&s_farm, "SELECT value FROM settings WHERE key = 'mask'");
    ck_assert_msg (setting && strcmp (setting, real) == 0, "%s", setting ? setting : "(none)");
    free (setting);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "mask", "exp1", "--clear", NULL), 0);
    ck_assert_msg (strstr (out, "mask of exp1: none"), "%s", out);
}
END_TEST

// u, v of the first field of an HDF5 export in SI against the same export in
// px: u_si = u_px K, v_si = -v_px K (y up), K = scale / dt, wherever valid.
static const char *s_si_of_px =
    "import sys, h5py, numpy as np\n"
    "K = float(sys.argv[2])\n"
    "for f in sys.argv[1].split(','):\n"
    "    si, px = h5py.File(f + '.si.h5', 'r'), h5py.File(f + '.px.h5', 'r')\n"
    "    assert si['u'].shape == px['u'].shape and si['u'].shape[0] == 4, si['u'].shape\n"
    "    ok = np.isfinite(px['u'][...]) & np.isfinite(si['u'][...])\n"
    "    assert ok.sum() > 100, ok.sum()\n"
    "    du = np.abs(si['u'][...] - px['u'][...] * K)[ok].max()\n"
    "    dv = np.abs(si['v'][...] + px['v'][...] * K)[ok].max()\n"
    "    assert du < 1e-6 * K and dv < 1e-6 * K, (f, du, dv)\n"
    "print('ok')\n";

// Exports 'exp' as DIR/<exp>.si.h5 and DIR/<exp>.px.h5 (again: replaced).
static void
s_export_both (const char *exp)
{
    char out[1 << 14], file[4096];
    snprintf (file, sizeof file, "%s/%s.si.h5", s_farm.dir, exp);
    ck_assert_msg (s_pivctl (out, sizeof out, "export", exp, "-f", "hdf5", "--force", "-o", file,
                             NULL)
                       == 0,
                   "%s", out);
    ck_assert_msg (strstr (out, "si units"), "%s", out);
    snprintf (file, sizeof file, "%s/%s.px.h5", s_farm.dir, exp);
    ck_assert_msg (s_pivctl (out, sizeof out, "export", exp, "-f", "hdf5", "--units", "px",
                             "--force", "-o", file, NULL)
                       == 0,
                   "%s", out);
}

// Waits until 'n' pairs of 'exp' are done (at most 120 s).
static void
s_wait_done_of (const char *exp, int64_t n)
{
    int64_t done = 0;
    for (int i = 0; i < 1200 && done != n; i++) {
        done = tu_farm_sql (&s_farm,
                            "SELECT count(*) FROM pairs p JOIN experiments e ON e.id = "
                            "p.experiment WHERE e.name = '%s' AND p.state = 2",
                            exp);
        if (done != n)
            usleep (100000);
    }
    ck_assert_msg (done == n, "%s: %lld of %lld pairs done", exp, (long long) done, (long long) n);
}

START_TEST (a_run_calibrated_after_recording_and_its_replays_come_out_calibrated_and_masked)
{
    s_farm_rotation ("32");
    char out[1 << 16];
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "r", 1, 4, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 4, 120).done, 4);

    // Recorded first, calibrated after (as PIVlab and DaVis users work): the
    // whole run converts.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1", "--scale", "0.02 mm/px",
                                "--dt", "2 ms", NULL),
                      0);
    // Its statistics too (their set takes the calibration: no new set).
    ck_assert_int_eq (s_pivctl (out, sizeof out, "stats", "exp1", "--json", NULL), 0);
    ck_assert_msg (strstr (out, "\"fields\":4") && strstr (out, "\"units\":\"si\"")
                       && strstr (out, "\"calibration\":\"scale=0.02mm/px"),
                   "%s", out);
    // A mask (all ones: nothing masked, the fields stay comparable).
    char mask[4096];
    snprintf (mask, sizeof mask, "%s/mask.tif", s_farm.dir);
    piv_image_t *ones = piv_image_new (256, 256);
    ck_assert_ptr_nonnull (ones);
    float *px = piv_image_data (ones);
    for (size_t k = 0; k < 256 * 256; k++)
        px[k] = 1;
    ck_assert_int_eq (piv_image_save (mask, (const piv_image_t *const *) &ones, 1, 8, NULL, 0), 0);
    piv_image_destroy (&ones);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "mask", "exp1", mask, NULL), 0);

    // Calibrated (another scale) before it exists: 'replay --as' still takes the name.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "again", "--scale", "0.05 mm/px",
                                "--dt", "2 ms", NULL),
                      0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "replay", "exp1", "--speed", "max", NULL), 0);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "replay", "exp1", "--as", "again", "--speed",
                                "max", NULL),
                      0);
    s_wait_done_of ("exp1.replay1", 4);
    s_wait_done_of ("again", 4);
    // The replay took the source's calibration and mask; 'again' kept its own
    // calibration and took the mask.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1.replay1", NULL), 0);
    ck_assert_msg (strstr (out, "0.02 mm/px, dt 2 ms") && strstr (out, "experiment"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "again", NULL), 0);
    ck_assert_msg (strstr (out, "0.05 mm/px, dt 2 ms"), "%s", out);
    char *masks = tu_farm_sql_text (&s_farm,
                                    "SELECT group_concat(e.name || '=' || s.value, ';') FROM "
                                    "settings s JOIN experiments e ON e.id = s.experiment WHERE "
                                    "s.key = 'mask' ORDER BY e.name");
    ck_assert_msg (masks && strstr (masks, "exp1.replay1=") && strstr (masks, "again=")
                       && strstr (masks, "mask.tif"),
                   "%s", masks ? masks : "(none)");
    free (masks);
    // Their tasks carry it.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "status", "-e", "again", "--json", NULL), 0);
    ck_assert_msg (strstr (out, "mask=") && strstr (out, "mask.tif"), "%s", out);

    s_export_both ("exp1");
    s_export_both ("exp1.replay1");
    char list[4096];
    snprintf (list, sizeof list, "%s/exp1,%s/exp1.replay1", s_farm.dir, s_farm.dir);
    int rc = s_python (s_si_of_px, out, sizeof out, list, "0.01");
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);
    s_export_both ("again");
    snprintf (list, sizeof list, "%s/again", s_farm.dir);
    rc = s_python (s_si_of_px, out, sizeof out, list, "0.025");
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);

    // A setup changed mid-run (--from now): the results before it keep theirs.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1", "--from", "later", NULL), 2);
    ck_assert_msg (strstr (out, "--from 'later'"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1", "--scale", "0.04 mm/px",
                                "--from", "now", NULL),
                      0);
    ck_assert_msg (strstr (out, "0.04 mm/px"), "%s", out);
    s_export_both ("exp1");
    snprintf (list, sizeof list, "%s/exp1", s_farm.dir);
    rc = s_python (s_si_of_px, out, sizeof out, list, "0.01");
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);
}
END_TEST

// ---------------------------------------------------------------------------
// A stereo experiment's results (issue 26): fields with w through a real
// broker, out of every output.

// A stereo field on an 8 x 8 grid: s_field's rotation plus (1, -0.5) px
// per frame in plane, w = w0 + 0.01 i - 0.02 j px per frame along +z, the
// residual 0.05 + 0.001 k px; vector (1, 1) INVALID (a hole) as an agent
// writes it.
static piv_field_t *
s_stereo_field (double w0)
{
    piv_field_t *f = s_field (8, OMEGA, 1.0, -0.5);
    ck_assert_int_eq (piv_field_add_w (f), 0);
    for (int k = 0; k < 64; k++) {
        f->w[k] = (float)(w0 + 0.01 * (k % 8) - 0.02 * (k / 8));
        f->residual[k] = (float)(0.05 + 0.001 * k);
    }
    f->flags[9] = PIV_FLAG_INVALID;
    f->u[9] = f->v[9] = f->w[9] = 0;
    return f;
}

// A real broker over 'pairs' fake pairs s_0001.. of exp1 (landed by the
// test), exp1 calibrated 0.02 mm/px, dt 2 ms: 0.01 m/s a px per frame pair.
static void
s_calibrated_farm (int pairs)
{
    tu_farm_fake (&s_farm, pairs, "s");
    tu_farm_start_broker (&s_farm);
    char out[4096];
    ck_assert_int_eq (s_pivctl (out, sizeof out, "calibrate", "exp1", "--scale", "0.02mm/px",
                                "--dt", "2ms", NULL),
                      0);
}

// Lands pair 'pair' of s_calibrated_farm's and records 'field' as its
// RESULT from agent 'who'-<pair>.
static void
s_land_result (int pair, const char *who, const piv_field_t *field)
{
    tu_farm_land (&s_farm, "s", pair, pair, 0);
    char id[64];
    snprintf (id, sizeof id, "%s-%d", who, pair);
    ck_assert_msg (tu_farm_agent_result (&s_farm, id, field, 20000) > 0,
                   "no TASK or RECORDED for pair %d (see broker.log)", pair);
}

// Pair 1 of a second, planar experiment exp2 landed and its RESULT, the
// field 'field', recorded.
static void
s_planar_exp2 (const char *id, const piv_field_t *field)
{
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp2"), 0755) == 0);
    tu_spit (tu_path (s_farm.dir, "data/exp2/p_a.tif"), "fake", 4);
    tu_spit (tu_path (s_farm.dir, "data/exp2/p_b.tif"), "fake", 4);
    ck_assert (tu_farm_agent_result (&s_farm, id, field, 20000) > 0);
}

// The next message on the feedback topic of 'sub' (JSON, caller frees), or
// NULL after 20 s.
static char *
s_feedback_message (zsock_t *sub)
{
    zpoller_t *poller = zpoller_new (sub, NULL);
    char *json = NULL;
    if (zpoller_wait (poller, 20000)) {
        char *topic = zstr_recv (sub);
        json = zstr_recv (sub);
        zstr_free (&topic);
    }
    zpoller_destroy (&poller);
    return json;
}

static const char *s_stereo_h5_check =
    "import sys, h5py, numpy as np\n"
    "f = h5py.File(sys.argv[1], 'r'); px = np.load(sys.argv[2])\n"
    "w, u = f['w'], f['u']\n"
    "assert w.shape == (2, 8, 8) == u.shape and w.dtype == np.float32, w.shape\n"
    "assert w.attrs['units'] == 'm/s' == u.attrs['units'] and w.attrs['long_name']\n"
    "assert [d[0].name for d in w.dims] == [d[0].name for d in u.dims] == ['/time', '/y', '/x']\n"
    "assert w.chunks == u.chunks and w.compression == u.compression\n"
    "assert np.allclose(w[...], px['w'] * 0.01, rtol=1e-6, atol=1e-9), (w[0], px['w'][0])\n"
    "r = f['residual']; assert r.attrs['units'] == 'px' and r.shape == (2, 8, 8)\n"
    "assert np.allclose(r[...], px['residual'], rtol=1e-6)\n"
    "assert [d[0].name for d in r.dims] == ['/time', '/y', '/x']\n"
    "st = f['stats']; ok = px['flags'][0] == 0\n"
    "mean = px['w'].mean(axis=0) * 0.01\n"
    "assert np.allclose(st['w_mean'][...][ok], mean[ok], rtol=1e-6), (st['w_mean'][...], mean)\n"
    "assert np.isnan(st['w_mean'][1, 1]) and st['w_mean'].attrs['units'] == 'm/s'\n"
    "assert np.allclose(st['w_rms'][...][ok], px['w'].std(axis=0)[ok] * 0.01, atol=1e-9)\n"
    "for name in ('uw_mean', 'vw_mean'):\n"
    "    assert st[name].attrs['units'] == 'm^2/s^2' and st[name].shape == (8, 8), name\n"
    "assert [d[0].name for d in st['w_mean'].dims] == ['/stats/y', '/stats/x']\n"
    "print('ok', float(np.nanmean(st['w_mean'][...])))\n";

static const char *s_stereo_mat_check =
    "import sys, numpy as np, scipy.io\n"
    "m = scipy.io.loadmat(sys.argv[1]); px = np.load(sys.argv[2])\n"
    "w = m['w']  # ny x nx x nt, MATLAB's order\n"
    "assert w.shape == (8, 8, 2), w.shape\n"
    "assert np.allclose(np.moveaxis(w, 2, 0), px['w'] * 0.01, rtol=1e-6, atol=1e-9)\n"
    "assert np.allclose(np.moveaxis(m['residual'], 2, 0), px['residual'], rtol=1e-6)\n"
    "units = m['units'][0, 0]; assert units['w'][0] == 'm/s' and units['residual'][0] == 'px'\n"
    "st = m['stats'][0, 0]; assert st['w_mean'].shape == (8, 8)\n"
    "print('ok')\n";

// A stereo experiment as the farm records it: two RESULTs with PVF3 fields
// from an agent (spoken for over the protocol: no processor makes them
// yet) into a real broker, calibrated 0.02 mm/px, dt 2 ms. What a user
// gets: feedback mean_w in m/s, txt with a w column, HDF5 w and residual
// datasets with the scales of u, .mat w, statistics with mean w; and
// mean_w refused for a planar experiment.
START_TEST (a_stereo_run_through_the_broker_gives_w_in_every_output)
{
    s_calibrated_farm (2);
    char out[1 << 16];
    int rc = s_pivctl (out, sizeof out, "feedback", "set", "quantity=mean_w", "-e", "exp1", NULL);
    ck_assert_msg (rc == 0, "%s", out); // nothing says exp1 is planar yet
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", s_farm.dir);
    zsock_t *sub = zsock_new_sub (endpoint, "feedback.exp1/");
    ck_assert_ptr_nonnull (sub);
    usleep (300000); // the subscription reaches the broker
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    piv_field_t *fields[2] = {s_stereo_field (0.5), s_stereo_field (-0.3)};
    for (int i = 0; i < 2; i++) {
        s_land_result (i + 1, "stereo", fields[i]);
        char *json = s_feedback_message (sub);
        ck_assert_msg (json != NULL, "no feedback message for pair %d", i + 1);
        jdoc_t *doc = jdoc_parse (json, NULL, 0);
        ck_assert_ptr_nonnull (doc);
        double sum = 0, abs_sum = 0;
        int n = 0;
        for (int k = 0; k < 64; k++)
            if (fields[i]->flags[k] == PIV_FLAG_VALID)
                sum += fields[i]->w[k], abs_sum += fabs (fields[i]->w[k]), n++;
        double mean_w = jdoc_number (doc, NAN, "$.mean_w");
        ck_assert_msg (fabs (mean_w - 0.01 * sum / n) < 1e-9, "mean_w %.9g m/s, injected %.9g",
                       mean_w, 0.01 * sum / n);
        ck_assert (fabs (jdoc_number (doc, NAN, "$.mean_abs_w") - 0.01 * abs_sum / n) < 1e-9);
        ck_assert (jdoc_number (doc, NAN, "$.value") == mean_w);
        ck_assert_str_eq (jdoc_string (doc, "$.quantity"), "mean_w");
        ck_assert_str_eq (jdoc_string (doc, "$.units.velocity"), "m/s");
        if (i == 0)
            printf ("stereo feedback: mean_w %.6f m/s (injected %.6f)\n", mean_w, 0.01 * sum / n);
        jdoc_destroy (&doc);
        free (json);
    }
    zsock_destroy (&sub);
    tu_farm_wait_done (&s_farm, 2, 30);

    // The injected fields, for the readers to compare with.
    char npz[4200], script[8192];
    snprintf (npz, sizeof npz, "%s", tu_path (s_farm.dir, "injected.npz"));
    FILE *raw = fopen (tu_path (s_farm.dir, "injected.txt"), "w");
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 64; k++)
            fprintf (raw, "%.9g %.9g %d\n", fields[i]->w[k], fields[i]->residual[k],
                     fields[i]->flags[k]);
    fclose (raw);
    snprintf (script, sizeof script,
              "import numpy as np\n"
              "a = np.loadtxt('%s').reshape(2, 8, 8, 3)\n"
              "np.savez('%s', w=a[..., 0], residual=a[..., 1], flags=a[..., 2])\n",
              tu_path (s_farm.dir, "injected.txt"), npz);
    ck_assert_int_eq (s_python (script, out, sizeof out, NULL, NULL), 0);

    // HDF5 (h5py) and MAT (scipy).
    char h5[4200], mat[4200], dir[4200];
    snprintf (h5, sizeof h5, "%s", tu_path (s_farm.dir, "exp1.h5"));
    snprintf (mat, sizeof mat, "%s", tu_path (s_farm.dir, "exp1.mat"));
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "txt"));
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "hdf5", "-o", h5, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "exported 2 field(s)"), "%s", out);
    rc = s_python (s_stereo_h5_check, out, sizeof out, h5, npz);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "mat", "-o", mat, NULL);
    ck_assert_msg (rc == 0, "%s", out);
    rc = s_python (s_stereo_mat_check, out, sizeof out, mat, npz);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "scipy: %s", out);
    char *argv[] = {"/usr/bin/h5dump", "-H", h5, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 60), 0);
    ck_assert_msg (strstr (out, "DATASET \"w\"") && strstr (out, "DATASET \"residual\""), "%.2000s",
                   out);

    // txt: the w column, in m/s; the header names w's unit.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "exp1", "-o", dir, NULL), 0);
    char path[8400], err[512];
    snprintf (path, sizeof path, "%s/s_0002.txt", dir);
    char *text = tu_slurp (path, NULL);
    ck_assert_ptr_nonnull (text);
    ck_assert_msg (strstr (text, "# units: x, y in m; u, v, w in m/s (w along z") != NULL, "%s",
                   text);
    ck_assert (strstr (text, "# x y u v w flags peak_ratio residual vorticity") != NULL);
    free (text);
    piv_field_t *back = piv_field_read_txt (path, err, sizeof err);
    ck_assert_msg (back && back->w, "%s", err);
    for (int k = 0; k < 64; k++) {
        ck_assert (fabs (back->w[k] - fields[1]->w[k] * 0.01) < 1e-9);
        ck_assert (fabs (back->residual[k] - fields[1]->residual[k]) < 1e-6);
    }
    piv_field_destroy (&back);

    // pivctl stats: mean w after the planar columns.
    snprintf (path, sizeof path, "%s", tu_path (s_farm.dir, "stats.txt"));
    rc = s_pivctl (out, sizeof out, "stats", "exp1", "-o", path, NULL);
    ck_assert_msg (rc == 0, "%s", out);
    text = tu_slurp (path, NULL);
    const char *names = "# x y u_mean v_mean u_rms v_rms uv_mean count n_valid n_replaced "
                        "w_mean w_rms uw_mean vw_mean u_mean_uncertainty v_mean_uncertainty "
                        "u_rms_uncertainty v_rms_uncertainty vorticity_mean_uncertainty "
                        "w_mean_uncertainty w_rms_uncertainty sigma_u_rms sigma_v_rms n_eff\n";
    const char *row = strstr (text, names);
    ck_assert_msg (row != NULL, "%.3000s", text);
    row += strlen (names);
    for (int k = 0; k < 64; k++) {
        double col[24]; // the uncertainty's last 10: NaN after 2 fields
        const char *eol = strchr (row, '\n');
        for (int c = 0; c < 24; c++)
            col[c] = strtod (row, (char **)&row);
        ck_assert (row == eol);
        row = eol + 1;
        double want = 0.01 * (fields[0]->w[k] + fields[1]->w[k]) / 2;
        ck_assert_msg (k == 9 ? isnan (col[10]) : fabs (col[10] - want) < 1e-9,
                       "point %d: w_mean %.9g m/s, want %.9g", k, col[10], want);
    }
    free (text);

    // A planar experiment's fields have no w: mean_w is refused for it.
    piv_field_t *planar = s_field (8, OMEGA, 0, 0);
    s_planar_exp2 ("planar-1", planar);
    piv_field_destroy (&planar);
    rc = s_pivctl (out, sizeof out, "feedback", "set", "quantity=mean_w", "-e", "exp2", NULL);
    ck_assert_msg (rc != 0 && strstr (out, "quantity 'mean_w' of experiment 'exp2' refused")
                       && strstr (out, "planar"),
                   "%d: %s", rc, out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "feedback", "set", "quantity=mean_w", "-e",
                                "exp1", NULL),
                      0);
    for (int i = 0; i < 2; i++)
        piv_field_destroy (&fields[i]);
}
END_TEST

// ---------------------------------------------------------------------------
// Each vector's uncertainty (issue 27): fields with sigma_u, sigma_v through
// a real broker, out of every export.

// s_field's rotation on an 8 x 8 grid with sigma_u = s0 + 0.001 k, sigma_v
// = 2 s0 - 0.0005 k px (vector k); vector (1, 1) INVALID with NaN, as the
// engine writes a vector it could not measure.
static piv_field_t *
s_sigma_field (double s0)
{
    piv_field_t *f = s_field (8, OMEGA, 1.0, -0.5);
    ck_assert_int_eq (piv_field_add_sigma (f), 0);
    for (int k = 0; k < 64; k++) {
        f->sigma_u[k] = (float)(s0 + 0.001 * k);
        f->sigma_v[k] = (float)(2 * s0 - 0.0005 * k);
    }
    f->flags[9] = PIV_FLAG_INVALID;
    f->sigma_u[9] = f->sigma_v[9] = NAN;
    return f;
}

// argv: the export of pairs 1 (no sigma), 2 (sigma), 3 (no sigma); the
// injected sigma_u, sigma_v of pair 2 (px) and its sigma_vorticity
// (1/frame); the export of a run without. 0.02 mm/px over 2 ms: 0.01 m/s a
// px, 500 1/s a 1/frame. Inside, sigma_vorticity is checked by hand
// against the circulation stencil (piv/derived.h): dv/dx's weights +-0.5 x
// (1/4, 1/2, 1/4) across, so sigma^2 h^2 = the sum over pairs of its
// points of rho w w' sigma_v sigma_v', plus the same of du/dy's with
// sigma_u, rho the share of window area (windows of 2 steps: (1 - |di| / 2)
// (1 - |dj| / 2)).
static const char *s_sigma_h5_check =
    "import sys, h5py, numpy as np\n"
    "f = h5py.File(sys.argv[1], 'r'); px = np.loadtxt(sys.argv[2]).reshape(8, 8, 3)\n"
    "u = f['u']\n"
    "for i, name in enumerate(('sigma_u', 'sigma_v')):\n"
    "    s = f[name]\n"
    "    assert s.shape == u.shape == (3, 8, 8) and s.dtype == np.float32, s.shape\n"
    "    assert s.attrs['units'] == 'm/s' == u.attrs['units'], s.attrs['units']\n"
    "    assert s.attrs['long_name'] == 'standard uncertainty of ' + name[-1], s.attrs['long_name']\n"
    "    assert [d[0].name for d in s.dims] == ['/time', '/y', '/x']\n"
    "    assert s.chunks == u.chunks and s.compression == u.compression\n"
    "    want = px[..., i] * 0.01\n"
    "    assert np.allclose(s[1], want, rtol=1e-6, atol=1e-12, equal_nan=True), (s[1], want)\n"
    "    assert np.isnan(s[1][1, 1]) and (s[1][~np.isnan(want)] > 0).all()  # never turned by y_up\n"
    "    assert np.isnan(s[0]).all() and np.isnan(s[2]).all(), (s[0], s[2])\n"
    "s = f['sigma_vorticity']\n"
    "assert s.shape == u.shape and s.attrs['units'] == '1/s', s.attrs['units']\n"
    "assert s.attrs['long_name'] == 'standard uncertainty of the vorticity'\n"
    "assert np.allclose(s[1], px[..., 2] * 500, rtol=1e-6, equal_nan=True), (s[1], px[..., 2])\n"
    "assert np.isnan(s[0]).all() and np.isnan(s[1][1, 1]) and (s[1][3:, 3:] > 0).all()\n"
    "h = (f['x'][1] - f['x'][0]) / 2e-5; su, sv = px[..., 0], px[..., 1]; wt = [0.25, 0.5, 0.25]\n"
    "rho = lambda a, b: max(0, 1 - abs(a[0] - b[0]) / 2) * max(0, 1 - abs(a[1] - b[1]) / 2)\n"
    "def var(terms, sig):\n"
    "    return sum(rho(a, b) * a[2] * b[2] * sig[a[1], a[0]] * sig[b[1], b[0]] for a in terms for b in terms)\n"
    "for j in range(3, 7):\n"
    "    for i in range(3, 7):\n"
    "        dvdx = [(i + d, j + b, d * 0.5 * wt[b + 1]) for d in (-1, 1) for b in (-1, 0, 1)]\n"
    "        dudy = [(i + b, j + d, d * 0.5 * wt[b + 1]) for d in (-1, 1) for b in (-1, 0, 1)]\n"
    "        want = np.sqrt(var(dvdx, sv) + var(dudy, su)) / h * 500\n"
    "        assert abs(want - s[1][j, i]) < 1e-5 * s[1][j, i], (i, j, want, s[1][j, i])\n"
    "g = h5py.File(sys.argv[3], 'r')\n"
    "assert 'u' in g and 'sigma_u' not in g and 'sigma_vorticity' not in g, sorted(g)\n"
    "print('ok', float(f['sigma_u'][1, 0, 0]), 'sigma_vorticity', float(s[1][4, 4]), '1/s')\n";

static const char *s_sigma_mat_check =
    "import sys, numpy as np, scipy.io\n"
    "m = scipy.io.loadmat(sys.argv[1]); px = np.loadtxt(sys.argv[2]).reshape(8, 8, 3)\n"
    "for i, name in enumerate(('sigma_u', 'sigma_v', 'sigma_vorticity')):\n"
    "    s = np.moveaxis(m[name], 2, 0)  # ny x nx x nt, MATLAB's order\n"
    "    k = 500 if i == 2 else 0.01\n"
    "    assert s.shape == (3, 8, 8) and s.dtype == np.float32, s.shape\n"
    "    assert np.allclose(s[1], px[..., i] * k, rtol=1e-6, atol=1e-12, equal_nan=True)\n"
    "    assert np.isnan(s[0]).all() and np.isnan(s[2]).all()\n"
    "    assert m['units'][0, 0][name][0] == ('1/s' if i == 2 else 'm/s')\n"
    "n = scipy.io.loadmat(sys.argv[3])\n"
    "assert 'u' in n and 'sigma_u' not in n and 'sigma_vorticity' not in n, sorted(n)\n"
    "assert 'sigma_u' not in n['units'].dtype.names\n"
    "print('ok')\n";

static const char *s_sigma_vtk_check =
    "import sys, vtk, numpy as np\n"
    "def read(path):\n"
    "    r = vtk.vtkStructuredGridReader(); r.SetFileName(path)\n"
    "    r.ReadAllScalarsOn(); r.ReadAllVectorsOn(); r.Update()\n"
    "    pd = r.GetOutput().GetPointData()\n"
    "    return {pd.GetArrayName(i): pd.GetArray(i) for i in range(pd.GetNumberOfArrays())}\n"
    "px = np.loadtxt(sys.argv[2]).reshape(8, 8, 3)\n"
    "a = read(sys.argv[1] + '/s_0002.vtk')\n"
    "for i, name in enumerate(('sigma_u', 'sigma_v', 'sigma_vorticity')):\n"
    "    got = np.array([a[name].GetTuple1(k) for k in range(64)]).reshape(8, 8)\n"
    "    want = px[..., i] * (500 if i == 2 else 0.01)\n"
    "    assert np.allclose(got, want, rtol=1e-6, atol=1e-12, equal_nan=True), got\n"
    "a = read(sys.argv[1] + '/s_0001.vtk')\n"
    "assert 'velocity' in a and 'sigma_u' not in a and 'sigma_vorticity' not in a, sorted(a)\n"
    "print('ok')\n";

// A run whose agent measured each vector's uncertainty for pair 2 only
// (RESULTs with a PVS1 field between two PVF1 ones) into a real broker,
// calibrated 0.02 mm/px, dt 2 ms: HDF5 and .mat carry sigma_u, sigma_v in
// m/s (NaN for pairs 1 and 3), VTK has them as scalars, txt as its last
// columns with the unit in the header; a run without sigma has none.
START_TEST (a_run_with_uncertainty_carries_sigma_in_every_export)
{
    s_calibrated_farm (3);
    char out[1 << 16];
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    piv_field_t *fields[3] = {s_field (8, OMEGA, 1.0, -0.5), s_sigma_field (0.05),
                              s_field (8, OMEGA, 1.0, -0.5)};
    for (int i = 0; i < 3; i++)
        s_land_result (i + 1, "unc", fields[i]);
    tu_farm_wait_done (&s_farm, 3, 30);
    char injected[4200];
    snprintf (injected, sizeof injected, "%s", tu_path (s_farm.dir, "sigma.txt"));
    FILE *raw = fopen (injected, "w");
    ck_assert_ptr_nonnull (raw);
    float sigma_w[64];
    // All but the hole (1, 1), (1, 0) (no d/dy) and (0, 1) (no d/dx).
    ck_assert_int_eq (piv_field_derive_sigma_vorticity (fields[1], PIV_STENCIL_DEFAULT, sigma_w),
                      61);
    for (int k = 0; k < 64; k++)
        fprintf (raw, "%.9g %.9g %.9g\n", fields[1]->sigma_u[k], fields[1]->sigma_v[k],
                 sigma_w[k]);
    fclose (raw);

    // A second, planar run without sigma, for what an export of it lacks.
    piv_field_t *plain = s_field (8, OMEGA, 0, 0);
    s_planar_exp2 ("plain-1", plain);
    piv_field_destroy (&plain);

    // HDF5 (h5py) and MAT (scipy).
    char h5[4200], h5_plain[4200], mat[4200], mat_plain[4200], dir[4200];
    snprintf (h5, sizeof h5, "%s", tu_path (s_farm.dir, "exp1.h5"));
    snprintf (h5_plain, sizeof h5_plain, "%s", tu_path (s_farm.dir, "exp2.h5"));
    snprintf (mat, sizeof mat, "%s", tu_path (s_farm.dir, "exp1.mat"));
    snprintf (mat_plain, sizeof mat_plain, "%s", tu_path (s_farm.dir, "exp2.mat"));
    int rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "hdf5", "-o", h5, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "exported 3 field(s)"), "%s", out);
    rc = s_pivctl (out, sizeof out, "export", "exp2", "--format", "hdf5", "--units", "px", "-o",
                   h5_plain, NULL);
    ck_assert_msg (rc == 0, "%s", out);
    rc = s_python3 (s_sigma_h5_check, out, sizeof out, h5, injected, h5_plain);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "h5py: %s", out);
    printf ("sigma export: %s", out);
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "mat", "-o", mat, NULL);
    ck_assert_msg (rc == 0, "%s", out);
    rc = s_pivctl (out, sizeof out, "export", "exp2", "--format", "mat", "--units", "px", "-o",
                   mat_plain, NULL);
    ck_assert_msg (rc == 0, "%s", out);
    rc = s_python3 (s_sigma_mat_check, out, sizeof out, mat, injected, mat_plain);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "scipy: %s", out);

    // VTK: two scalars in pair 2's file, none in pair 1's.
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "vtk"));
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "vtk", "-o", dir, NULL);
    ck_assert_msg (rc == 0, "%s", out);
    rc = s_python (s_sigma_vtk_check, out, sizeof out, dir, injected);
    ck_assert_msg (rc == 0 && strstr (out, "ok"), "vtk: %s", out);

    // txt: the last three columns, in m/s and 1/s as the header says.
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "txt"));
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "exp1", "-o", dir, NULL), 0);
    char path[8400];
    snprintf (path, sizeof path, "%s/s_0002.txt", dir);
    char *text = tu_slurp (path, NULL);
    ck_assert_ptr_nonnull (text);
    ck_assert_msg (strstr (text, "# units: x, y in m; u, v, sigma_u, sigma_v in m/s; "
                                 "sigma_vorticity in 1/s (")
                       != NULL,
                   "%s", text);
    const char *row = strstr (text, "\n# x y u v flags peak_ratio ");
    ck_assert_msg (row != NULL, "%s", text);
    row = strchr (row + 1, '\n');
    ck_assert_msg (strncmp (row - 32, " sigma_u sigma_v sigma_vorticity", 32) == 0, "%s", text);
    row++;
    for (int k = 0; k < 64; k++) {
        double col[16];
        int c = 0;
        const char *eol = strchr (row, '\n');
        while (row < eol && c < 16) {
            char *end;
            col[c++] = strtod (row, &end);
            ck_assert (end > row);
            row = end;
        }
        row = eol + 1;
        double want_u = fields[1]->sigma_u[k] * 0.01, want_v = fields[1]->sigma_v[k] * 0.01;
        double want_w = sigma_w[k] * 500;
        ck_assert_msg (k == 9 ? isnan (col[c - 3]) && isnan (col[c - 2]) && isnan (col[c - 1])
                              : fabs (col[c - 3] - want_u) < 1e-6 * want_u
                                    && fabs (col[c - 2] - want_v) < 1e-6 * want_v
                                    && (isnan (want_w)
                                            ? isnan (col[c - 1])
                                            : fabs (col[c - 1] - want_w) < 1e-6 * want_w),
                       "vector %d: sigma %.9g %.9g m/s %.9g 1/s, injected %.9g %.9g %.9g", k,
                       col[c - 3], col[c - 2], col[c - 1], want_u, want_v, want_w);
    }
    free (text);
    snprintf (path, sizeof path, "%s/s_0001.txt", dir);
    text = tu_slurp (path, NULL);
    ck_assert_ptr_nonnull (text);
    ck_assert_msg (strstr (text, "sigma_u") == NULL, "%s", text);
    free (text);
    for (int i = 0; i < 3; i++)
        piv_field_destroy (&fields[i]);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *s = suite_create ("export");
    TCase *tc = tcase_create ("files");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 300);
    tcase_add_test (tc, hdf5_export_reads_back_in_si_units_with_h5py_and_h5dump);
    tcase_add_test (tc, hdf5_export_opens_in_xarray_with_labelled_coordinates);
    tcase_add_test (tc, mat_export_reads_in_scipy_equal_to_the_txt_export);
    tcase_add_test (tc, hdf5_export_refuses_results_of_two_calibrations_naming_their_ranges);
    tcase_add_test (tc, vtk_export_opens_in_vtk_with_the_statistics_file);
    tcase_add_test (tc, txt_export_converts_with_the_calibration_and_says_so);
    tcase_add_test (tc, stems_become_file_names_as_they_are_and_an_empty_one_is_named_by_its_pair);
    tcase_add_test (tc, a_calibration_applies_to_the_whole_run_up_to_a_change_from_now);
    tcase_add_test (tc, si_units_are_refused_for_an_experiment_never_calibrated);
    tcase_add_test (tc, hdf5_export_memory_does_not_grow_with_the_number_of_fields);
    tcase_add_test (tc, stats_reads_the_last_checkpoint_when_the_broker_is_away);
    tcase_add_test (tc, stats_files_carry_the_uncertainty_in_the_calibrations_units);
    tcase_add_test (tc, calibrate_and_mask_check_their_arguments_before_asking);
    tcase_add_test (tc, export_and_stats_in_every_format_never_write_through_a_link_nor_over_a_file);
    tcase_add_test (tc, a_file_in_the_way_of_any_file_refuses_before_the_first_is_written);
    tcase_add_test (tc, an_export_of_more_files_than_it_may_open_at_once_completes);
    tcase_add_test (tc, an_export_stopped_by_sigint_leaves_whole_files_and_no_temporary);
    tcase_add_test (tc, a_name_taken_while_an_export_runs_stops_it_there_and_leaves_no_temporary);
    tcase_add_test (tc, a_calibrated_farm_run_exports_and_counts_the_exact_flow);
    tcase_add_test (tc,
                    a_run_calibrated_after_recording_and_its_replays_come_out_calibrated_and_masked);
    tcase_add_test (tc, a_stereo_run_through_the_broker_gives_w_in_every_output);
    tcase_add_test (tc, a_run_with_uncertainty_carries_sigma_in_every_export);
    suite_add_tcase (s, tc);
    return s;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
