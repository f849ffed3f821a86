// dash.h — what the status page shows, gathered once per request from the
// broker's `status` reply (live figures) and the store (read-only), then
// rendered as HTML (html.c), JSON (json_out.c) or Prometheus metrics
// (prometheus.c). Strings in the model are
// raw as read: every renderer escapes them.

#ifndef DASHBOARD_DASH_H
#define DASHBOARD_DASH_H

#include "common/config.h"
#include "piv/calib.h"
#include "piv/field.h"
#include "piv/stats.h"

#include <stdint.h>
#include <stdio.h>

#define DASH_FAILURES 10        // latest failures listed
#define DASH_LOG_TAIL 20000     // events read from the end of the log, at most
#define DASH_SERIES 240         // feedback points kept for the time series
#define DASH_LATENCIES 1024     // feedback latencies kept per experiment (as the broker)
#define DASH_BUCKET_S 10        // rate history: bucket width, s
#define DASH_BUCKETS 30         // ... and count (5 minutes)
#define DASH_QUIVER_MAX 40      // arrows along the longer side of the quiver plot, at most
#define DASH_HIST_MAX 32        // latency histogram buckets kept from the broker, at most
#define DASH_MAP_MAX 64         // colour map cells along the longer side, at most
#define DASH_ARRAY_MAX 128      // grid points along a side the JSON gives whole; beyond, decimated

#define DASH_UNPAIRED 10        // files in no pair named per experiment (the broker's 5 + 5)

// The files of an experiment in no pair, as the broker's status says
// (doc/control.md, unpaired): nothing vanishes.
typedef struct {
    int64_t waiting;        // files waiting for a partner
    int64_t refused;        // files the pairing rule refused
    char rule[32];          // the pairing rule
    char expects[256];      // what a pair is under it
    struct {
        char name[256];     // the file
        char state[16];     // "refused" or "waiting"
        char why[320];      // why it is in no pair
    } files[DASH_UNPAIRED]; // the first few
    int nfiles;
} dash_unpaired_t;

// One experiment. Counts come from the store; NAN (or -1 for integers)
// marks a figure that is unknown (the broker did not answer and the store
// cannot say) or does not exist (no results yet).
typedef struct {
    int64_t id;             // store id
    char *name;             // experiment
    char *source;           // directory its files come from
    int64_t created_ns;     // when it was first seen
    int64_t files;          // files recorded
    int64_t pairs[5];       // by store_state_t
    int64_t total;          // every pair
    int64_t queue;          // pairs queued in the broker (-1: unknown)
    double rate_10s;        // results per second over 10 s
    double rate_1m;         // ... over 1 min
    double latency_median_ms;  // camera close -> result, median
    double latency_p99_ms;  // ... 99th percentile
    char policy[32];        // all | latest | sample N
    double rate_limit;      // pairs/s; NAN: no limit
    int paused;             // 1 paused
    int live;               // 1: rates, latency, queue, policy from the broker
    int64_t last_result_ns; // the latest result in the log tail (0: none seen)
    int64_t tail_results;   // results in the log tail
    // The broker's latency histogram (live only): every result since it
    // started, cumulative counts at or under each bound; hist_n 0: none.
    int hist_n;
    double hist_le_s[DASH_HIST_MAX];
    int64_t hist_cumulative[DASH_HIST_MAX];
    int64_t hist_count;     // every result counted (the +Inf bucket)
    double hist_sum_s;      // their latencies added up
    dash_unpaired_t *unpaired;  // files in no pair (live only; NULL: unknown)
} dash_exp_t;

// One agent: from the broker when it answers (alive), else from the log
// tail (names seen dispatching or answering, alive unknown).
typedef struct {
    char *id;               // agent id
    char *host;             // "" when unknown
    int cores;              // worker threads (-1: unknown)
    int tasks;              // tasks in hand (-1: unknown)
    int64_t done;           // results recorded (broker), or in the log tail
    double heartbeat_s;     // seconds since its last heartbeat (NAN: unknown)
    int64_t last_seen_ns;   // its latest event in the log tail (0: none)
    int alive;              // 1 alive, 0 dead (known to the log, not to the broker), -1 unknown
} dash_agent_t;

typedef struct {
    int64_t pair;           // pair id
    char *experiment;       // its experiment
    char *stem;             // its name
    char *agent;            // the agent of its last attempt
    char *error;            // why it failed
    int attempts;           // attempts made
    int64_t finished_ns;    // when it failed
} dash_failure_t;

// A point of the feedback time series (a "feedback" event).
typedef struct {
    int64_t t_ns;           // computed_ns: when the result was recorded
    double value;           // the chosen quantity
    double setpoint;        // NAN unless the controller is on
    double output;          // the controller's output (NAN when off)
    int image_units;        // 1: value and setpoint in px or 1/frame (recorded uncalibrated)
} dash_point_t;

// The experiment page's extra content.
typedef struct {
    dash_exp_t *exp;        // the experiment (in dash_t.exps)
    piv_field_t *field;     // its latest vector field (NULL: none)
    int64_t field_pair;     // its pair
    char *field_stem;       // ... and stem
    char field_source[16];  // "store" or "file"
    char field_note[256];   // why no field is shown, when none is
    char *quantity;         // the feedback quantity plotted (NULL: no feedback yet)
    char feedback_unit[16]; // its unit on the page: the calibration's when calibrated (points
                            // recorded in image units converted, measure.c), else as the
                            // latest message names it (px, m/s, 1/s ...; "": none)
    dash_point_t series[DASH_SERIES];  // oldest first
    int npoints;
    int64_t buckets[DASH_BUCKETS];  // results per bucket, oldest first
    int64_t buckets_end_ns; // end of the last bucket (now)
    int64_t tail_start_ns;  // the log tail starts here: earlier buckets are unknown (0: whole log)
    // Measurements (measure.c): the calibration in force, the run's saved
    // statistics and the latest field's vorticity.
    piv_calib_t calib;      // the calibration in force (piv_calib_init: none)
    const char *calib_from; // "experiment", "global" (scope 0), "configuration" or "none"
    char calib_note[256];   // a calibration that could not be read, and why ("": none)
    piv_stats_t *stats;     // the latest saved statistics set (NULL: none yet)
    piv_calib_t stats_calib;  // the calibration its results were counted under
    char *stats_set;        // its key
    char *stats_settings;   // its PIV settings
    int64_t stats_updated_ns;  // when the broker saved it
    int nsets;              // statistics sets of the experiment (a change of grid starts one)
    char stats_note[512];   // why no statistics are shown, when none are
    piv_field_t *mean;      // the mean field (px, px/frame; flag INVALID where no sample)
    float *speed;           // its speed in stats_calib's unit (m/s or px/frame; NaN: no sample)
    double speed_min, speed_max;  // over the finite values (NAN: none)
    float *vorticity;       // the latest field's vorticity in calib's unit (1/s or 1/frame),
                            // nx * ny as page->field (NULL: none; NaN where not computed)
    double vorticity_min, vorticity_max;  // over the finite values (NAN: none)
    float *w;               // a stereo latest field's w (along +z) in calib's velocity unit,
                            // nx * ny as page->field (NULL: a planar field; NaN: INVALID)
    double w_min, w_max;    // over the finite values (NAN: none)
    struct dash_ensemble_s *ensemble;  // its ensemble correlation (ensemble_card.c; NULL: none)
    float *sigma;           // the latest field's |sigma| = sqrt (sigma_u^2 + sigma_v^2) in
                            // calib's velocity unit, nx * ny as page->field (NULL: a field
                            // without uncertainty; NaN: INVALID or not estimated)
    double sigma_min, sigma_max;  // over the finite values (NAN: none)
} dash_page_t;

// An experiment's ensemble correlation on its page (ensemble_card.c): its
// latest job, and the field of the latest one done.
typedef struct dash_ensemble_s {
    int64_t job;            // the latest job
    char state[16];         // running, done or failed
    int pass, passes;       // its pass under way (from 1) of
    int64_t pairs;          // the pairs it sums
    int64_t done_job;       // the latest job done (0: none), whose field follows
    int64_t done_pairs;     // its pairs
    int window, overlap;    // its last windows (px) and overlap (%)
    piv_field_t *field;     // its field (px, px/frame; NULL: none done)
    float *speed;           // its speed in the calibration's unit (NaN: no peak)
    double speed_min, speed_max;  // over the finite values (NAN: none)
} dash_ensemble_t;

typedef struct {
    int64_t now_ns;         // when the page was made
    const char *conf_path;  // the configuration file
    config_t cfg;           // its contents
    int broker_ok;          // 1: the broker answered 'status'
    char broker_error[512]; // why not
    int broker_status;      // the status the broker answered 'status' with when not 200
                            // (its message in broker_error); 0: no answer at all
    int agents_partial;     // the broker listed only some agents (a summary)
    double uptime_s;        // broker figures (broker_ok only)
    int64_t queue;
    int64_t results;
    double rate_10s, rate_1m;
    int store_ok;           // the broker says its store works
    char store_state[16];   // "ok", "busy", "failing", "lost" (the broker's)
    char store_error[1536]; // why it takes nothing now, when it does not
    int64_t store_busy;     // times the broker found its store locked by another (-1: unknown)
    struct {
        char peer[300];     // "agent 'a1' on node3", "the writer of files of 'exp1'"
        double skew_s;      // its clock less the broker's
    } clocks[32];           // peers' clocks as the broker measures them, largest skew first
    int nclocks;
    char policy[32];        // global default policy, rate limit, pause
    double rate_limit;
    int paused;
    struct {
        char level[16];     // "warning" or "critical"
        char message[600];  // the broker's line
    } warnings[8];          // storage warnings (doc/storage.md), from the broker
    int nwarnings;
    struct {
        char kind[16];      // "space", "allocation", "expiry", "archive"
        char level[16];
        int count;          // warnings of this kind and level in force
    } warning_counts[16];   // every warning the broker listed, counted
    int nwarning_counts;
    int64_t agents_total;   // agents the broker knows, all alive (-1: unknown)
    struct {
        const char *role;   // "watch root", "results", "store"
        char path[4096];    // the directory
        int64_t free_bytes; // free to unprivileged users (-1: unknown)
        int64_t total_bytes;
        int pausing;        // 1: below storage/critical_free, it pauses dispatch (the broker's)
    } volumes[3];           // from the broker, else measured here (statvfs)
    int nvolumes;
    int64_t store_bytes;    // the store's file and its -wal (-1: unknown)
    int64_t wal_bytes;      // its -wal alone (0: none; -1: no store)
    int64_t log_events;     // events in the log tail read
    int log_whole;          // 1: the tail holds the whole log
    dash_exp_t *exps;       // experiments, store id order
    int nexps;
    dash_agent_t *agents;   // agents, alive first, then by id
    int nagents;
    dash_failure_t failures[DASH_FAILURES];  // latest first
    int nfailures;
    dash_page_t *page;      // the experiment page (NULL: the overview)
} dash_t;

// Fills 'dash' (zeroed by the caller, cfg and conf_path set): asks the
// broker for 'status' (waiting at most timeout_ms), reads the store. With
// 'experiment' not NULL, also the experiment page. Returns 0; 1 when
// 'experiment' is unknown; -1 with err when the store cannot be read.
int dash_gather (dash_t *dash, const char *experiment, int timeout_ms, char *err, size_t errlen);
void dash_release (dash_t *dash);

// The quiver plot's thinning: every 'stride'-th vector in each direction.
int dash_quiver_stride (const piv_field_t *field);

// The experiment page's measurements (measure.c), read from the open store
// 'store' (a store_t) for dash->page: the calibration in force (the
// experiment's latest "calibration" setting, else the global one, else the
// configuration's [calibration]), the latest saved statistics set as a mean
// field, and the vorticity of page->field. What cannot be read is said in
// calib_note / stats_note; returns -1 only when the store fails.
struct _store_t;
int dash_measure (dash_t *dash, struct _store_t *store);
void dash_measure_release (dash_page_t *page);
// The experiment's ensemble correlation into page->ensemble (left NULL when
// it has no job): -1 only when the store fails. Its release.
int dash_ensemble_gather (dash_t *dash, struct _store_t *store);
void dash_ensemble_release (dash_page_t *page);
// The thinning of the JSON's arrays: every 'stride'-th point in each
// direction, so that neither side exceeds DASH_ARRAY_MAX.
int dash_array_stride (int nx, int ny);
// Viridis (t 0..1) and a blue-white-red diverging map (t -1..1) as "#rrggbb".
void dash_viridis (double t, char *hex);
void dash_diverging (double t, char *hex);
// A round number near x: 1, 2 or 5 times a power of ten.
double dash_nice (double x);
// The experiment page's measurement cards (maps.c): the mean field over
// its speed, the latest field's vorticity, the statistics' figures.
void dash_maps_html (const dash_t *dash, FILE *out);
// 'v' in 'unit' on an axis or legend whose values reach 'mag' (the largest
// magnitude shown), 'step' apart: an SI prefix chosen for mag, decimals for
// step. The prefix joins m, m/s and s ("10 µm/s", "-5 mm/s") and stands
// alone for a bare number ("10 µ"); units that take none (px, px/frame,
// 1/s, 1/frame) get a power of ten ("10e-6 1/s"). No "-0". Returns buf.
const char *dash_si (double v, double mag, double step, const char *unit, char *buf, size_t size);
// A plot's frame: image pixels (x0..x1, y0..y1, the grid's extent) to SVG
// units (left, top: the plot's corner; k: SVG units per px; pw, ph: its size).
typedef struct {
    double x0, y0, x1, y1;
    double left, top, k;
    double pw, ph;
} dash_plot_t;
// The axes of a plot drawn as the camera sees it (x to the right, image
// rows downward), labelled in the experiment's coordinates: positions from
// the calibration's origin in mm (y growing upward with y_axis = up), or
// image pixels when not calibrated; ticks below and left, axis titles
// "x (mm)" and "y (mm) \u2191". An SVG <g class="axes">.
void dash_plot_axes (FILE *out, const dash_plot_t *plot, const piv_calib_t *c);
// The axes' unit: "mm" when calibrated, else "px".
const char *dash_axis_unit (const piv_calib_t *c);

// Renderers: the whole response body to 'out'.
void dash_html (const dash_t *dash, FILE *out);
void dash_json (const dash_t *dash, FILE *out);
// Prometheus text exposition format 0.0.4 (doc/dashboard.md, "Metrics").
void dash_prometheus (const dash_t *dash, FILE *out);
// An error page: status line text (e.g. "400 Bad Request") and a message.
void dash_html_error (FILE *out, const char *status, const char *message);

// An error response as JSON (json_out.c): {"status":..., "error":...}.
void dash_json_error (FILE *out, const char *status, const char *message);

// Escaping (esc.c): text as HTML (& < > " ' escaped); invalid UTF-8
// becomes U+FFFD. (JSON: common/jout.h, which escapes < > & as well.)
void dash_put_html (FILE *out, const char *text);
// Text as a Prometheus label value, without its quotes: backslash, " and
// newline escaped, other control characters and invalid UTF-8 as U+FFFD.
void dash_put_prom_label (FILE *out, const char *text);

// The query string of a request (query.c).
typedef struct {
    char *exp;  // experiment page (NULL: the overview)
    int json;   // ?format=json
    int prometheus;  // ?format=prometheus (never with 'exp')
} dash_query_t;
// Parses 'query' into q (its strings point into 'query', decoded in place
// as a form's: %XX and '+'; q must be zeroed before). 'exp' takes every
// name the farm takes for an experiment (path_check_component). 0, or -1
// with why: a query over 2048 bytes, a malformed %-escape or a NUL, an
// unknown or repeated parameter, a name the farm would refuse (why says
// which rule), a bad format, 'exp' with format=prometheus. On -1, q->json
// and q->prometheus still say the format asked for, when it was well
// formed: the error goes back in it.
int dash_query_parse (char *query, dash_query_t *q, char *why, size_t size);

// 'text' as a URL's query value: every byte but the unreserved ones (RFC
// 3986: letters, digits, -._~) percent-encoded, so that it is safe inside
// an HTML attribute too; dash_query_parse reads it back unchanged.
void dash_put_query_value (FILE *out, const char *text);

#endif
