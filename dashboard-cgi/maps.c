// maps.c — the experiment page's measurements as HTML: the run's mean field
// (arrows over a colour map of its speed), the vorticity of the latest
// field (a colour map), each with its colour legend and axes in physical
// units when the experiment is calibrated (positions in mm, velocities in
// m/s, rates in 1/s; px, px/frame and 1/frame otherwise), and the
// statistics' figures. Drawn as the image shows the flow: x to the right,
// image rows downward; the axis labels give the calibrated coordinates.

#include "dashboard-cgi/dash.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define S_PLOT_MAX 460.0 // plot area's longer side, SVG units
#define S_LEVELS 48      // colour levels of a map (equal neighbours merge)

// One colour map to draw.
typedef struct {
    const char *id;           // the SVG's id
    const piv_field_t *grid;  // positions (px); with 'arrows', its u, v (px/frame)
    const float *value;       // nx * ny values in 'unit' (NaN: a hole)
    double lo, hi;            // the colour scale's ends
    int diverging;            // 1: blue-white-red around 0; 0: viridis
    int arrows;               // 1: the grid's vectors drawn over
    const char *arrow_class;  // their class (NULL: "mean-arrow")
    const char *quantity;     // "|V|", "\xCF\x89z"
    const char *unit;         // "m/s", "1/frame" ...
    const piv_calib_t *calib; // positions' conversion
} s_map_t;

// The plot's frame (dash_plot_t): x0..y1 the grid's extent, px (half a
// step beyond the outer points); left, top its corner; k SVG units per px.
typedef dash_plot_t s_frame_t;

// ---------------------------------------------------------------------------
// Colours and numbers

void
dash_viridis (double t, char *hex)
{
    static const unsigned char stops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                              {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                              {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
    if (!isfinite (t) || t < 0)
        t = 0;
    if (t > 1)
        t = 1;
    double pos = t * 8;
    int k = (int)pos < 8 ? (int)pos : 7;
    double f = pos - k;
    int rgb[3];
    for (int c = 0; c < 3; c++)
        rgb[c] = (int)lround (stops[k][c] + f * (stops[k + 1][c] - stops[k][c]));
    sprintf (hex, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

void
dash_diverging (double t, char *hex)
{
    // ColorBrewer RdBu's ends and white: negative blue, positive red.
    static const unsigned char blue[3] = {33, 102, 172}, red[3] = {178, 24, 43};
    if (!isfinite (t))
        t = 0;
    t = t < -1 ? -1 : t > 1 ? 1 : t;
    const unsigned char *end = t < 0 ? blue : red;
    double f = fabs (t);
    int rgb[3];
    for (int c = 0; c < 3; c++)
        rgb[c] = (int)lround (255 + f * (end[c] - 255));
    sprintf (hex, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

double
dash_nice (double x)
{
    if (!(x > 0))
        return 1;
    double p = pow (10, floor (log10 (x)));
    double m = x / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

// A value on the map's colour scale: t in 0..1 (viridis) or -1..1.
static double
s_scale (const s_map_t *m, double x)
{
    if (m->diverging) {
        double r = fmax (fabs (m->lo), fabs (m->hi));
        return r > 0 ? x / r : 0;
    }
    return m->hi > m->lo ? (x - m->lo) / (m->hi - m->lo) : 0.5;
}

static void
s_map_colour (const s_map_t *m, double t, char *hex)
{
    if (m->diverging)
        dash_diverging (t, hex);
    else
        dash_viridis (t, hex);
}

// Positions as the axes read them: mm when calibrated, else px.
static double
s_axis_factor (const piv_calib_t *c)
{
    return c->set ? 1000 : 1;
}

const char *
dash_axis_unit (const piv_calib_t *c)
{
    return c->set ? "mm" : "px";
}

// Units an SI prefix joins: lengths, velocities, times, and a bare number.
static int
s_prefixable (const char *unit)
{
    static const char *const units[] = {"", "m", "m/s", "s", NULL};
    for (int i = 0; units[i]; i++)
        if (strcmp (unit, units[i]) == 0)
            return 1;
    return 0;
}

// Decimals for values 'step' apart: enough to tell neighbours apart, one
// more where the step itself needs it (0.25, not 0.2); at most 6.
static int
s_decimals (double step)
{
    step = fabs (step);
    if (!(step > 0) || !isfinite (step))
        return 0;
    int d = step < 1 ? (int) ceil (-log10 (step) - 1e-9) : 0;
    double scaled = step * pow (10, d);
    if (fabs (scaled - round (scaled)) > 1e-6 * scaled)
        d++;
    return d > 6 ? 6 : d;
}

const char *
dash_si (double v, double mag, double step, const char *unit, char *buf, size_t size)
{
    static const char *const prefixes[] = {"f", "p", "n", "\xC2\xB5", "m", "", "k", "M", "G", "T"};
    if (!isfinite (v)) {
        snprintf (buf, size, "\xE2\x80\x94");
        return buf;
    }
    mag = fabs (mag);
    int e3 = mag > 0 && isfinite (mag) ? 3 * (int) floor (log10 (mag) / 3 + 1e-9) : 0;
    e3 = e3 < -15 ? -15 : e3 > 12 ? 12 : e3;
    double f = pow (10, e3), x = v / f;
    int decimals = s_decimals (step / f);
    if (fabs (x) < 0.5 * pow (10, -decimals))
        x = 0;  // no "-0.00"
    const char *space = *unit ? " " : "";
    // A bare number takes a prefix only far from 1 ("10 µ", not "500 m").
    if (s_prefixable (unit) && (*unit || mag < 1e-3 || mag >= 1e4))
        snprintf (buf, size, "%.*f%s%s%s", decimals, x, *unit || e3 ? " " : "",
                  prefixes[e3 / 3 + 5], unit);
    else if (e3 && (mag < 1e-3 || mag >= 1e4))
        snprintf (buf, size, "%.*fe%d%s%s", decimals, x, e3, space, unit);
    else {  // plain: as many decimals as the step needs
        decimals = s_decimals (step);
        snprintf (buf, size, "%.*f%s%s", decimals, fabs (v) < 0.5 * pow (10, -decimals) ? 0 : v,
                  space, unit);
    }
    return buf;
}

// ---------------------------------------------------------------------------
// The parts of a map

static void
s_frame (const piv_field_t *g, s_frame_t *fr)
{
    double step = g->step > 0 ? g->step : 1;
    long last = (long)g->nx * g->ny - 1;
    fr->x0 = g->x[0] - step / 2, fr->y0 = g->y[0] - step / 2;
    fr->x1 = g->x[last] + step / 2, fr->y1 = g->y[last] + step / 2;
    double w = fmax (fr->x1 - fr->x0, 1), h = fmax (fr->y1 - fr->y0, 1);
    fr->k = S_PLOT_MAX / fmax (w, h);
    fr->pw = w * fr->k, fr->ph = h * fr->k;
    fr->left = 64, fr->top = 10;
}

// The colour level of the block of cs x cs grid points from (i, j): the
// mean of its finite values, or S_HOLE.
#define S_HOLE INT_MIN
static int
s_block_level (const s_map_t *m, int i, int j, int cs)
{
    const piv_field_t *g = m->grid;
    double sum = 0;
    int n = 0;
    for (int b = j; b < j + cs && b < g->ny; b++)
        for (int a = i; a < i + cs && a < g->nx; a++)
            if (isfinite (m->value[b * g->nx + a]))
                sum += m->value[b * g->nx + a], n++;
    return n ? (int)lround (s_scale (m, sum / n) * S_LEVELS) : S_HOLE;
}

// The cells: blocks of the grid (at most DASH_MAP_MAX along a side),
// neighbours of one colour level merged into one rectangle.
static void
s_cells (FILE *out, const s_map_t *m, const s_frame_t *fr)
{
    const piv_field_t *g = m->grid;
    int cs = (int)ceil ((double)(g->nx > g->ny ? g->nx : g->ny) / DASH_MAP_MAX);
    double half = (g->step > 0 ? g->step : 1) / 2.0;
    fputs ("<g class=\"cells\" shape-rendering=\"crispEdges\">", out);
    for (int j = 0; j < g->ny; j += cs) {
        int last = j + cs < g->ny ? j + cs : g->ny;
        double y = g->y[j * g->nx] - half;
        double ye = last < g->ny ? g->y[last * g->nx] - half : fr->y1;
        int start = -1, level = S_HOLE;
        // One step past the last block (i >= nx) ends the row's last run.
        for (int i = 0; i < g->nx + cs; i += cs) {
            int now = i < g->nx ? s_block_level (m, i, j, cs) : S_HOLE;
            if (start >= 0 && now != level) {
                char hex[8];
                s_map_colour (m, (double)level / S_LEVELS, hex);
                double x = g->x[start] - half, xe = i < g->nx ? g->x[i] - half : fr->x1;
                fprintf (out,
                         "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                         "fill=\"%s\"/>",
                         fr->left + (x - fr->x0) * fr->k, fr->top + (y - fr->y0) * fr->k,
                         (xe - x) * fr->k + 0.3, (ye - y) * fr->k + 0.3, hex);
                start = -1;
            }
            if (now != S_HOLE && start < 0)
                start = i, level = now;
        }
    }
    fputs ("</g>", out);
}

// The field's vectors, thinned as the latest field's quiver; the longest
// spans 0.9 of the spacing of the arrows shown. Returns the arrows drawn.
static int
s_arrows (FILE *out, const s_map_t *m, const s_frame_t *fr)
{
    const piv_field_t *g = m->grid;
    int stride = dash_quiver_stride (g), drawn = 0;
    double longest = 0, step = g->step > 0 ? g->step : 1;
    for (long n = 0; n < (long)g->nx * g->ny; n++)
        if (g->flags[n] != PIV_FLAG_INVALID && isfinite (g->u[n]) && isfinite (g->v[n]))
            longest = fmax (longest, hypot (g->u[n], g->v[n]));
    double a = longest > 0 ? 0.9 * stride * step * fr->k / longest : 0;
    fputs ("<g fill=\"none\" stroke=\"#1d2433\" stroke-width=\"1.1\" stroke-linecap=\"round\">",
           out);
    for (int j = 0; j < g->ny; j += stride)
        for (int i = 0; i < g->nx; i += stride) {
            int n = j * g->nx + i;
            if (g->flags[n] == PIV_FLAG_INVALID || !isfinite (g->u[n]) || !isfinite (g->v[n]))
                continue;
            double px = fr->left + (g->x[n] - fr->x0) * fr->k,
                   py = fr->top + (g->y[n] - fr->y0) * fr->k;
            double dx = g->u[n] * a, dy = g->v[n] * a, len = hypot (dx, dy);
            double hl = fmin (len * 0.33, 5), ux = len > 0 ? dx / len : 0,
                   uy = len > 0 ? dy / len : 0;
            double hx = px + dx, hy = py + dy;
            fprintf (out,
                     "<path class=\"%s\" d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f "
                     "%.1fL%.1f %.1f\"/>",
                     m->arrow_class ? m->arrow_class : "mean-arrow", px, py, hx, hy, hx - hl * (0.866 * ux - 0.5 * uy),
                     hy - hl * (0.866 * uy + 0.5 * ux), hx, hy, hx - hl * (0.866 * ux + 0.5 * uy),
                     hy - hl * (0.866 * uy - 0.5 * ux));
            drawn++;
        }
    fputs ("</g>", out);
    return drawn;
}

// Ticks of one axis: round values of the physical coordinate along it.
// 'from', 'to': the plot's ends in px; 'a', 'b': coordinate = a + b * px
// (in axis units); 'horizontal': x axis (below) or y axis (left).
static void
s_ticks (FILE *out, const s_frame_t *fr, double from, double to, double a, double b, int horizontal)
{
    double c0 = a + b * from, c1 = a + b * to;
    double lo = fmin (c0, c1), hi = fmax (c0, c1);
    double step = dash_nice ((hi - lo) / 4);
    int decimals = step < 1 ? (int)ceil (-log10 (step)) : 0;
    for (double t = ceil (lo / step) * step; t <= hi + step * 1e-9; t += step) {
        double px = (t - a) / b;
        double s = (horizontal ? fr->left + (px - fr->x0) * fr->k : fr->top + (px - fr->y0) * fr->k);
        double v = fabs (t) < step * 1e-9 ? 0 : t;
        if (horizontal)
            fprintf (out,
                     "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#6b7385\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>",
                     s, s, fr->top + fr->ph, fr->top + fr->ph + 4, s, fr->top + fr->ph + 16,
                     decimals, v);
        else
            fprintf (out,
                     "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#6b7385\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>",
                     fr->left - 4, fr->left, s, s, fr->left - 6, s + 3.5, decimals, v);
    }
}

void
dash_plot_axes (FILE *out, const dash_plot_t *fr, const piv_calib_t *c)
{
    // The calibration is affine along each axis: coordinate = a + b * px.
    double f = s_axis_factor (c), ox, oy, x1, y1;
    piv_calib_position (c, 0, 0, &ox, &oy);
    piv_calib_position (c, 1, 1, &x1, &y1);
    fputs ("<g class=\"axes\" font-size=\"10.5\" fill=\"#6b7385\">", out);
    s_ticks (out, fr, fr->x0, fr->x1, ox * f, (x1 - ox) * f, 1);
    s_ticks (out, fr, fr->y0, fr->y1, oy * f, (y1 - oy) * f, 0);
    const char *unit = dash_axis_unit (c);
    fprintf (out,
             "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">x (%s)"
             "</text><text class=\"axis-label\" transform=\"translate(14 %.1f) rotate(-90)\" "
             "text-anchor=\"middle\">y (%s)%s</text></g>",
             fr->left + fr->pw / 2, fr->top + fr->ph + 32, unit, fr->top + fr->ph / 2, unit,
             c->set && c->y_up ? " \xE2\x86\x91" : "");
}

// The colour legend: a bar with its ends (and 0 when diverging) marked.
static void
s_legend (FILE *out, const s_map_t *m, double y)
{
    double x = 64, w = 240;
    fprintf (out,
             "<g class=\"legend\" font-size=\"11\" fill=\"#1d2433\"><defs><linearGradient "
             "id=\"%s-scale\">",
             m->id);
    for (int s = 0; s <= 8; s++) {
        char hex[8];
        s_map_colour (m, m->diverging ? s / 4.0 - 1 : s / 8.0, hex);
        fprintf (out, "<stop offset=\"%.3f\" stop-color=\"%s\"/>", s / 8.0, hex);
    }
    double r = fmax (fabs (m->lo), fabs (m->hi));
    double lo = m->diverging ? -r : m->lo, hi = m->diverging ? r : m->hi;
    double mag = fmax (fabs (lo), fabs (hi));
    char lo_text[64], hi_text[64];
    fprintf (out,
             "</linearGradient></defs><text x=\"%.1f\" y=\"%.1f\">%s (%s)</text><rect x=\"%.1f\" "
             "y=\"%.1f\" width=\"%.1f\" height=\"10\" fill=\"url(#%s-scale)\" stroke=\"#c9d0dc\"/>"
             "<text class=\"tick-min\" x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\">%s</text>"
             "<text class=\"tick-max\" x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" "
             "text-anchor=\"end\">%s</text>",
             x, y + 9, m->quantity, m->unit, x + 80, y, w, m->id, x + 80, y + 23,
             dash_si (lo, mag, mag / 100, m->unit, lo_text, sizeof lo_text), x + 80 + w, y + 23,
             dash_si (hi, mag, mag / 100, m->unit, hi_text, sizeof hi_text));
    if (m->diverging)
        fprintf (out,
                 "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10.5\" text-anchor=\"middle\">0"
                 "</text>",
                 x + 80 + w / 2, y + 23);
    fputs ("</g>", out);
}

// The whole map as one SVG.
static void
s_map (FILE *out, const s_map_t *m)
{
    s_frame_t fr;
    s_frame (m->grid, &fr);
    double vw = fr.left + fr.pw + 12, vh = fr.top + fr.ph + 80;
    fprintf (out,
             "<svg class=\"map\" id=\"%s\" data-unit=\"%s\" data-min=\"%.6g\" data-max=\"%.6g\" "
             "viewBox=\"0 0 %.0f %.0f\" width=\"100%%\" style=\"max-width:%.0fpx\" role=\"img\" "
             "xmlns=\"http://www.w3.org/2000/svg\"><title>%s (%s)</title>"
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e9ecf1\"/>",
             m->id, m->unit, m->lo, m->hi, vw, vh, vw, m->quantity, m->unit, fr.left, fr.top, fr.pw,
             fr.ph);
    s_cells (out, m, &fr);
    if (m->arrows)
        s_arrows (out, m, &fr);
    fprintf (out,
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
             "stroke=\"#c9d0dc\"/>",
             fr.left, fr.top, fr.pw, fr.ph);
    dash_plot_axes (out, &fr, m->calib);
    s_legend (out, m, fr.top + fr.ph + 44);
    fputs ("</svg>", out);
}

// ---------------------------------------------------------------------------
// The cards

static void
s_calibration_line (FILE *out, const dash_page_t *page)
{
    char text[256];
    piv_calib_describe (&page->calib, text, sizeof text);
    fputs ("<div class=\"note\" id=\"calibration\">Calibration: <span class=\"calib\" "
           "style=\"font-weight:600\">",
           out);
    dash_put_html (out, text);
    fputs ("</span>", out);
    if (page->calib.set)
        fprintf (out, " (%s)",
                 strcmp (page->calib_from, "experiment") == 0 ? "set for this experiment"
                 : strcmp (page->calib_from, "global") == 0 ? "the farm's default, pivctl calibrate"
                                                            : "the configuration's [calibration]");
    else
        fputs (" \xC2\xB7 set one with <span class=\"mono\">pivctl calibrate EXP --scale S --dt "
               "T</span>",
               out);
    if (page->calib_note[0]) {
        fputs ("<div class=\"err\">", out);
        dash_put_html (out, page->calib_note);
        fputs ("</div>", out);
    }
    fputs ("</div>", out);
}

static void
s_stats_figures (FILE *out, const dash_page_t *page)
{
    piv_stats_summary_t sum;
    piv_stats_summary (page->stats, &sum);
    fprintf (out,
             "<table class=\"stats\"><tr><th>Fields counted</th><th>Valid fraction</th>"
             "<th>Convergence</th><th>Sets</th></tr><tr><td class=\"fields\">%lld</td>"
             "<td class=\"valid\">",
             (long long)sum.fields);
    if (isfinite (sum.valid_fraction))
        fprintf (out, "%.1f %%", 100 * sum.valid_fraction);
    else
        fputs ("\xE2\x80\x94", out);
    fputs ("</td><td class=\"convergence\">", out);
    if (isfinite (sum.convergence))
        fprintf (out, "%.2f %% <span class=\"mute\">since field %lld</span>", 100 * sum.convergence,
                 (long long)sum.convergence_from);
    else
        fputs ("\xE2\x80\x94 <span class=\"mute\">too few fields</span>", out);
    fprintf (out, "</td><td>%d</td></tr></table>", page->nsets);
    char text[256], in_force[256], counted[256];
    piv_calib_describe (&page->stats_calib, text, sizeof text);
    piv_calib_format (&page->stats_calib, counted, sizeof counted);
    piv_calib_format (&page->calib, in_force, sizeof in_force);
    fputs ("<div class=\"note\">Set <span class=\"mono\">", out);
    dash_put_html (out, page->stats_set);
    // Counted in px whatever the calibration; shown with the one in force.
    if (strcmp (counted, in_force) == 0)
        fputs ("</span> \xC2\xB7 counted under the calibration in force", out);
    else {
        fputs ("</span> \xC2\xB7 counted under: ", out);
        dash_put_html (out, text);
        fputs (", shown with the calibration in force", out);
    }
    fputs (" \xC2\xB7 convergence: RMS change of the mean velocity over the last ~10 % of the "
           "fields, relative to the mean speed \xC2\xB7 <span class=\"mono\">pivctl stats</span> "
           "gives the whole field.</div>",
           out);
}

// A map of the latest field's values: the heading's note 'what' (ending
// before the field's stem), the map 'm', then a note of its range between
// 'before' and 'after'.
static void
s_latest_map (FILE *out, const dash_page_t *page, const char *what, const s_map_t *m,
              const char *before, const char *after)
{
    fputs (what, out);
    dash_put_html (out, page->field_stem);
    fputs ("</span></span></h2>", out);
    s_map (out, m);
    char lo[64], hi[64];
    double mag = fmax (fabs (m->lo), fabs (m->hi));
    fprintf (out, "<div class=\"note\">%s%s to %s%s</div>", before,
             dash_si (m->lo, mag, mag / 1000, m->unit, lo, sizeof lo),
             dash_si (m->hi, mag, mag / 1000, m->unit, hi, sizeof hi), after);
}

// The ensemble correlation's card (issue 27), beside the mean of the
// instantaneous fields: its latest job done as a map of its mean velocity
// over its speed, and the latest job's state; nothing without a job.
static void
s_ensemble_card (FILE *out, const dash_page_t *page)
{
    const dash_ensemble_t *e = page->ensemble;
    if (!e)
        return;
    fputs ("<div id=\"ensemble-card\"><h2>Ensemble field", out);
    if (e->field && isfinite (e->speed_max)) {
        fprintf (out,
                 "<span class=\"n\">arrows: ensemble correlation of %lld pairs (job %lld), "
                 "%d px windows, %d %% overlap; colour: its speed</span></h2>",
                 (long long) e->done_pairs, (long long) e->done_job, e->window, e->overlap);
        s_map_t m = {.id = "ensemble-field",
                     .grid = e->field,
                     .value = e->speed,
                     .lo = e->speed_min,
                     .hi = e->speed_max,
                     .arrows = 1,
                     .arrow_class = "ensemble-arrow",
                     .quantity = "|V|",
                     .unit = piv_calib_unit (&page->calib, PIV_UNIT_VELOCITY),
                     .calib = &page->calib};
        s_map (out, &m);
    }
    else
        fputs ("</h2><div class=\"empty\">No ensemble field done yet.</div>", out);
    fprintf (out, "<div class=\"note\">Latest job %lld: %s", (long long) e->job, e->state);
    if (strcmp (e->state, "running") == 0)
        fprintf (out, ", pass %d of %d", e->pass, e->passes);
    fprintf (out, ", %lld pairs. <span class=\"mono\">pivctl export ", (long long) e->pairs);
    dash_put_html (out, page->exp->name);
    fputs (" --ensemble -o FILE</span></div></div>", out);
}

// The map of values of the latest field (drawn on its grid) in 'unit' of
// the calibration in force: the members every such map shares.
static s_map_t
s_latest_of (const dash_page_t *page, const char *id, const float *value, double lo, double hi,
             const char *quantity, piv_unit_t unit)
{
    return (s_map_t) {.id = id,
                      .grid = page->field,
                      .value = value,
                      .lo = lo,
                      .hi = hi,
                      .quantity = quantity,
                      .unit = piv_calib_unit (&page->calib, unit),
                      .calib = &page->calib};
}

void
dash_maps_html (const dash_t *dash, FILE *out)
{
    const dash_page_t *page = dash->page;
    fputs ("<div class=\"card\" id=\"measurements\"><h2>Measurements</h2>", out);
    s_calibration_line (out, page);
    fputs ("<div style=\"display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));"
           "gap:18px;margin-top:12px\"><div id=\"mean-card\"><h2>Mean field",
           out);
    if (page->mean && isfinite (page->speed_max)) {
        piv_stats_summary_t sum;
        piv_stats_summary (page->stats, &sum);
        fprintf (out,
                 "<span class=\"n\">arrows: mean velocity over %lld fields; colour: its "
                 "speed</span></h2>",
                 (long long)sum.fields);
        s_map_t m = {.id = "mean-field",
                     .grid = page->mean,
                     .value = page->speed,
                     .lo = page->speed_min,
                     .hi = page->speed_max,
                     .arrows = 1,
                     .quantity = "|V|",
                     .unit = piv_calib_unit (&page->calib, PIV_UNIT_VELOCITY),
                     .calib = &page->calib};
        s_map (out, &m);
        s_stats_figures (out, page);
    }
    else {
        fputs ("</h2><div class=\"empty\">", out);
        dash_put_html (out, page->stats_note[0] ? page->stats_note : "no sample counted yet");
        fputs ("</div>", out);
    }
    fputs ("</div>", out);
    s_ensemble_card (out, page);
    fputs ("<div id=\"vorticity-card\"><h2>Vorticity", out);
    if (page->vorticity && isfinite (page->vorticity_max)) {
        s_map_t m = s_latest_of (page, "vorticity", page->vorticity, page->vorticity_min,
                                 page->vorticity_max, "\xCF\x89z", PIV_UNIT_RATE);
        m.diverging = 1;
        s_latest_map (out, page,
                      "<span class=\"n\">\xCF\x89z = \xE2\x88\x82v/\xE2\x88\x82x \xE2\x88\x92 "
                      "\xE2\x88\x82u/\xE2\x88\x82y of the latest field, <span class=\"mono\">",
                      &m, "Range ",
                      "; grey: no value (no valid vector to take a difference with along x or "
                      "y).");
    }
    else
        fputs ("</h2><div class=\"empty\">No vorticity: no field with a regular grid yet.</div>",
               out);
    fputs ("</div>", out);
    // A stereo field's third component: a planar experiment's page has no
    // such card (as before stereo).
    if (page->w && isfinite (page->w_max)) {
        s_map_t m = s_latest_of (page, "w-field", page->w, page->w_min, page->w_max, "w",
                                 PIV_UNIT_VELOCITY);
        m.diverging = 1;
        m.arrows = 1;
        m.arrow_class = "w-arrow";
        s_latest_map (out, page,
                      "<div id=\"w-card\"><h2>Out-of-plane velocity<span class=\"n\">colour: "
                      "w along +z (out of the light sheet), arrows: u, v of the latest field, "
                      "<span class=\"mono\">",
                      &m, "w from ", " (red: towards +z, blue: away); grey: no valid vector.");
        fputs ("</div>", out);
    }
    // Each vector's uncertainty (uncertainty=cs|mc): a field without has
    // no such card (as before issue 27).
    if (page->sigma && isfinite (page->sigma_max)) {
        s_map_t m = s_latest_of (page, "sigma-field", page->sigma, page->sigma_min,
                                 page->sigma_max, "|\xCF\x83|", PIV_UNIT_VELOCITY);
        s_latest_map (out, page,
                      "<div id=\"sigma-card\"><h2>Uncertainty<span class=\"n\">colour: each "
                      "vector's standard uncertainty |\xCF\x83| = \xE2\x88\x9A(\xCF\x83u\xC2\xB2 + "
                      "\xCF\x83v\xC2\xB2) of the latest field, <span class=\"mono\">",
                      &m, "|\xCF\x83| from ",
                      "; grey: no estimate (an invalid vector, or one without a correlation "
                      "peak of its own).");
        fputs ("</div>", out);
    }
    fputs ("</div></div>", out);
}
