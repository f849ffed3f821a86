// html.c — the status page as HTML: the overview (experiments, agents,
// failures) and an experiment's page (the latest field as an inline SVG
// quiver plot, rate history, feedback time series). Every string from the
// model goes through dash_put_html; numbers carry their units.

#include "dashboard-cgi/dash.h"

#include "store/store.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define S_REFRESH_S 2

static const char s_css[] =
    ":root{--bg:#f4f6f9;--card:#fff;--ink:#1d2433;--mute:#6b7385;--line:#e3e7ee;"
    "--ok:#1a9955;--okbg:#e3f6ec;--warn:#b26a00;--warnbg:#fff3dc;--bad:#c62828;--badbg:#fde8e8;"
    "--info:#2458c6;--infobg:#e6eefc;--idle:#5f6675;--idlebg:#eceef2}"
    "*{box-sizing:border-box}"
    "body{margin:0;background:var(--bg);color:var(--ink);"
    "font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif}"
    "header{background:#18202f;color:#fff;padding:12px 28px;display:flex;align-items:center;"
    "gap:18px}"
    "header h1{font-size:18px;margin:0;font-weight:600;letter-spacing:.3px}"
    "header a{color:#cfd8ea;text-decoration:none}header .crumb{color:#cfd8ea;font-size:15px}"
    "header .right{margin-left:auto;font-size:12.5px;color:#aab4c8;display:flex;gap:14px;"
    "align-items:center}"
    "main{padding:20px 28px 40px;max-width:1400px;margin:0 auto}"
    ".banner{border-radius:8px;padding:12px 16px;margin-bottom:18px;font-weight:500}"
    ".banner.bad{background:var(--badbg);color:var(--bad);border:1px solid #f3b9b9}"
    ".banner.warn{background:#fff6e0;color:#7a5200;border:1px solid #f0d48a}"
    ".banner small{display:block;font-weight:400;color:#7a2a2a;margin-top:2px}"
    ".tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:14px;"
    "margin-bottom:18px}"
    ".tile{background:var(--card);border:1px solid var(--line);border-radius:10px;"
    "padding:12px 16px}"
    ".tile .k{color:var(--mute);font-size:12px;text-transform:uppercase;letter-spacing:.5px}"
    ".tile .v{font-size:24px;font-weight:600;font-variant-numeric:tabular-nums;margin-top:2px}"
    ".tile .v small{font-size:13px;color:var(--mute);font-weight:500;margin-left:3px}"
    ".tile .s{color:var(--mute);font-size:12px}"
    ".card{background:var(--card);border:1px solid var(--line);border-radius:10px;"
    "padding:16px 18px;margin-bottom:18px}"
    ".card h2{font-size:15px;margin:0 0 12px;font-weight:600}"
    ".card h2 .n{color:var(--mute);font-weight:400;margin-left:6px}"
    "table{width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums}"
    "th{text-align:left;font-size:11.5px;text-transform:uppercase;letter-spacing:.4px;"
    "color:var(--mute);font-weight:600;padding:6px 10px;border-bottom:1px solid var(--line)}"
    "td{padding:8px 10px;border-bottom:1px solid var(--line);vertical-align:middle}"
    "tr:last-child td{border-bottom:none}td.num,th.num{text-align:right}"
    "td a{color:var(--info);font-weight:600;text-decoration:none}td a:hover{text-decoration:underline}"
    ".mute{color:var(--mute)}.mono{font-family:ui-monospace,'DejaVu Sans Mono',monospace;"
    "font-size:12.5px}.err{color:var(--bad);word-break:break-word}"
    ".pill{display:inline-block;padding:2px 9px;border-radius:999px;font-size:12px;"
    "font-weight:600;white-space:nowrap}"
    ".pill.ok{background:var(--okbg);color:var(--ok)}.pill.warn{background:var(--warnbg);"
    "color:var(--warn)}.pill.bad{background:var(--badbg);color:var(--bad)}"
    ".pill.info{background:var(--infobg);color:var(--info)}.pill.idle{background:var(--idlebg);"
    "color:var(--idle)}"
    ".bar{height:8px;background:var(--idlebg);border-radius:4px;overflow:hidden;display:flex;"
    "min-width:120px}"
    ".bar i{display:block;height:100%}.bar .d{background:var(--ok)}.bar .f{background:var(--bad)}"
    ".bar .s{background:#b9bfcb}.prog{display:flex;flex-direction:column;gap:3px}"
    ".prog span{font-size:12px;color:var(--mute)}.prog b{color:var(--ink);font-weight:600}"
    ".grid2{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:18px}"
    "@media(max-width:1000px){.grid2{grid-template-columns:1fr}}"
    "svg text{font-family:system-ui,'DejaVu Sans',sans-serif}"
    ".note{color:var(--mute);font-size:12.5px;margin-top:6px}"
    ".empty{color:var(--mute);padding:14px 0}";

// ---------------------------------------------------------------------------
// Numbers with units ("—" for what is unknown)

#define S_DASH "\xE2\x80\x94"

static void
s_rate (FILE *out, double x)
{
    if (!isfinite (x))
        fputs (S_DASH, out);
    else
        fprintf (out, x >= 100 ? "%.0f" : x >= 10 ? "%.1f" : "%.2f", x);
}

static void
s_ms (FILE *out, double ms)
{
    if (!isfinite (ms))
        fputs (S_DASH, out);
    else if (ms < 10)
        fprintf (out, "%.1f<small>ms</small>", ms);
    else if (ms < 1000)
        fprintf (out, "%.0f<small>ms</small>", ms);
    else if (ms < 60000)
        fprintf (out, "%.2f<small>s</small>", ms / 1000);
    else
        fprintf (out, "%.1f<small>min</small>", ms / 60000);
}

static void
s_ago (FILE *out, double s)
{
    if (!isfinite (s))
        fputs (S_DASH, out);
    else if (s < 60)
        fprintf (out, "%.1f s ago", s < 0 ? 0 : s);
    else if (s < 3600)
        fprintf (out, "%.0f min ago", s / 60);
    else if (s < 86400 * 2)
        fprintf (out, "%.1f h ago", s / 3600);
    else
        fprintf (out, "%.0f days ago", s / 86400);
}

static void
s_duration (FILE *out, double s)
{
    if (!isfinite (s))
        fputs (S_DASH, out);
    else if (s < 60)
        fprintf (out, "%.0f s", s);
    else if (s < 3600)
        fprintf (out, "%.0f min %.0f s", floor (s / 60), fmod (s, 60));
    else if (s < 86400)
        fprintf (out, "%.0f h %.0f min", floor (s / 3600), fmod (floor (s / 60), 60));
    else
        fprintf (out, "%.0f d %.0f h", floor (s / 86400), fmod (floor (s / 3600), 24));
}

// A time of day (local), and the date too when it is not today.
static void
s_clock (FILE *out, int64_t ns, int64_t now_ns)
{
    if (ns <= 0) {
        fputs (S_DASH, out);
        return;
    }
    time_t t = (time_t) (ns / 1000000000), now = (time_t) (now_ns / 1000000000);
    struct tm tm, today;
    localtime_r (&t, &tm);
    localtime_r (&now, &today);
    char text[64];
    strftime (text, sizeof text,
              tm.tm_yday == today.tm_yday && tm.tm_year == today.tm_year ? "%H:%M:%S"
                                                                         : "%Y-%m-%d %H:%M",
              &tm);
    fputs (text, out);
}

static void
s_limit (FILE *out, double rate)
{
    if (isfinite (rate)) {
        s_rate (out, rate);
        fputs (" pairs/s", out);
    }
    else
        fputs ("no limit", out);
}

static void
s_exp_link (FILE *out, const char *name)
{
    fputs ("<a href=\"?exp=", out);
    dash_put_query_value (out, name);
    fputs ("\">", out);
    dash_put_html (out, name);
    fputs ("</a>", out);
}

// ---------------------------------------------------------------------------
// States

// An experiment's state as a coloured pill: whether the farm keeps up.
static void
s_exp_state (FILE *out, const dash_exp_t *x)
{
    int64_t waiting = x->pairs[STORE_PENDING] + x->pairs[STORE_DISPATCHED];
    if (x->paused)
        fputs ("<span class=\"pill warn\">paused</span>", out);
    else if (waiting == 0 && x->total > 0)
        fputs ("<span class=\"pill ok\">caught up</span>", out);
    else if (waiting == 0 && x->unpaired && x->unpaired->waiting + x->unpaired->refused > 0)
        fprintf (out, "<span class=\"pill warn\">no pairs: %lld file(s) in none</span>",
                 (long long) (x->unpaired->waiting + x->unpaired->refused));
    else if (waiting == 0)
        fputs ("<span class=\"pill idle\">no pairs yet</span>", out);
    else if (x->live && x->rate_10s == 0 && x->pairs[STORE_DISPATCHED] == 0)
        fputs ("<span class=\"pill bad\">stalled</span>", out);
    else if (waiting > 50 && x->live && x->rate_10s > 0)
        fprintf (out, "<span class=\"pill warn\">backlog %lld</span>", (long long) waiting);
    else
        fputs ("<span class=\"pill info\">processing</span>", out);
}

static void
s_agent_state (FILE *out, const dash_agent_t *a)
{
    fputs (a->alive == 1   ? "<span class=\"pill ok\">alive</span>"
           : a->alive == 0 ? "<span class=\"pill bad\">dead</span>"
                           : "<span class=\"pill idle\">unknown</span>",
           out);
}

static void
s_progress (FILE *out, const dash_exp_t *x)
{
    double total = x->total > 0 ? (double) x->total : 1;
    fprintf (out,
             "<div class=\"prog\"><span><b>%lld</b> / %lld done%s</span>"
             "<div class=\"bar\"><i class=\"d\" style=\"width:%.2f%%\"></i>"
             "<i class=\"f\" style=\"width:%.2f%%\"></i><i class=\"s\" style=\"width:%.2f%%\">"
             "</i></div></div>",
             (long long) x->pairs[STORE_DONE], (long long) x->total,
             x->total ? "" : "", 100.0 * (double) x->pairs[STORE_DONE] / total,
             100.0 * (double) x->pairs[STORE_FAILED] / total,
             100.0 * (double) x->pairs[STORE_SKIPPED] / total);
}

// ---------------------------------------------------------------------------
// The frame of the page

static void
s_head (FILE *out, const dash_t *dash, const char *title)
{
    fputs ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">",
           out);
    fprintf (out, "<meta http-equiv=\"refresh\" content=\"%d\">", S_REFRESH_S);
    fputs ("<title>", out);
    dash_put_html (out, title);
    fputs (" \xC2\xB7 pivfarm</title><style>", out);
    fputs (s_css, out);
    fputs ("</style></head><body><header><h1><a href=\"?\" style=\"color:#fff\">pivfarm</a></h1>",
           out);
    if (dash->page) {
        fputs ("<span class=\"crumb\">/ ", out);
        dash_put_html (out, dash->page->exp->name);
        fputs ("</span>", out);
    }
    fputs ("<div class=\"right\">", out);
    if (dash->broker_ok) {
        fputs ("<span class=\"pill ok\">broker up ", out);
        s_duration (out, dash->uptime_s);
        fputs ("</span>", out);
    }
    else if (dash->broker_status)
        fprintf (out, "<span class=\"pill bad\">broker error %d</span>", dash->broker_status);
    else
        fputs ("<span class=\"pill bad\">broker unreachable</span>", out);
    fputs ("<span>updated ", out);
    s_clock (out, dash->now_ns, dash->now_ns);
    fprintf (out, " \xC2\xB7 refreshes every %d s</span>", S_REFRESH_S);
    fputs ("<a href=\"?", out);
    if (dash->page) {
        fputs ("exp=", out);
        dash_put_query_value (out, dash->page->exp->name);
        fputs ("&amp;", out);
    }
    fputs ("format=json\">JSON</a></div></header><main>", out);
    if (!dash->broker_ok && dash->broker_status) {
        // It answered, with an error: it runs, but cannot say how things go.
        fprintf (out, "<div class=\"banner bad\" id=\"broker-error\">The broker answered %d: ",
                 dash->broker_status);
        dash_put_html (out, dash->broker_error);
        fputs ("<small>The figures below come from the store alone (rates and latency from its "
               "log; no queue, no live agents).</small></div>",
               out);
    }
    else if (!dash->broker_ok) {
        fputs ("<div class=\"banner bad\" id=\"broker-unreachable\">Broker unreachable: the "
               "figures below come from the store alone (rates and latency from its log; "
               "no queue, no live agents).<small>",
               out);
        dash_put_html (out, dash->broker_error);
        fputs ("</small></div>", out);
    }
    else if (!dash->store_ok) {
        // Busy (another process holds it: things wait), lost (its files
        // were taken away: what to do), or failing (a commit failed).
        const char *what = strcmp (dash->store_state, "busy") == 0
                               ? "The broker's store is busy: new files and results wait"
                           : strcmp (dash->store_state, "lost") == 0
                               ? "The broker's store was taken away: nothing new is recorded"
                               : "The broker cannot write its store: nothing new is recorded";
        fprintf (out, "<div class=\"banner bad\" id=\"store-error\">%s.<small>", what);
        dash_put_html (out, *dash->store_error ? dash->store_error : "(see the broker's log)");
        fputs ("</small></div>", out);
    }
    // Storage: low space, RAM disks filling up or expiring, failed archives.
    for (int i = 0; i < dash->nwarnings; i++) {
        fprintf (out, "<div class=\"banner %s storage-warning\">",
                 strcmp (dash->warnings[i].level, "critical") == 0 ? "bad" : "warn");
        dash_put_html (out, dash->warnings[i].message);
        fputs ("</div>", out);
    }
}

static void
s_foot (FILE *out, const dash_t *dash)
{
    fputs ("<div class=\"note\">Store ", out);
    dash_put_html (out, dash->cfg.broker.store);
    fprintf (out, " \xC2\xB7 %s %lld events of the log read%s</div></main></body></html>\n",
             dash->log_whole ? "all" : "the last", (long long) dash->log_events,
             dash->log_whole ? "" : " (rates, agents and charts cover that span)");
}

static void
s_tile (FILE *out, const char *key)
{
    fprintf (out, "<div class=\"tile\"><div class=\"k\">%s</div><div class=\"v\">", key);
}

static void
s_tile_end (FILE *out, const char *sub)
{
    fprintf (out, "</div><div class=\"s\">%s</div></div>", sub ? sub : "&nbsp;");
}

// ---------------------------------------------------------------------------
// Tables

// Under an experiment's name: how many of its files are in no pair, and
// why in a word (the experiment's page names them).
static void
s_unpaired_line (FILE *out, const dash_exp_t *x)
{
    const dash_unpaired_t *u = x->unpaired;
    if (!u || u->waiting + u->refused == 0)
        return;
    fputs ("<div class=\"unpaired\" style=\"font-size:12px;color:var(--warn)\">", out);
    if (u->refused)
        fprintf (out, "%lld file(s) outside the rule \xE2\x80\x98", (long long) u->refused);
    if (u->refused)
        dash_put_html (out, u->rule);
    if (u->refused)
        fputs ("\xE2\x80\x99", out);
    if (u->waiting)
        fprintf (out, "%s%lld waiting for a partner", u->refused ? ", " : "",
                 (long long) u->waiting);
    fputs ("</div>", out);
}

// The experiment's files in no pair, named with why (the broker's first few).
static void
s_unpaired_card (FILE *out, const dash_exp_t *x)
{
    const dash_unpaired_t *u = x->unpaired;
    if (!u || u->waiting + u->refused == 0)
        return;
    fprintf (out,
             "<div class=\"card\" id=\"unpaired\"><h2>Files in no pair<span class=\"n\">%lld "
             "refused by the pairing rule, %lld waiting for a partner</span></h2>"
             "<div class=\"note\">Pairing rule <span class=\"mono\">",
             (long long) u->refused, (long long) u->waiting);
    dash_put_html (out, u->rule);
    fputs ("</span>: a pair is <span class=\"mono\">", out);
    dash_put_html (out, u->expects);
    fputs ("</span></div><table><tr><th>File</th><th>State</th><th>Why</th></tr>", out);
    for (int f = 0; f < u->nfiles; f++) {
        fputs ("<tr class=\"unpaired-file\"><td class=\"mono\">", out);
        dash_put_html (out, u->files[f].name);
        fprintf (out, "</td><td><span class=\"pill %s\">", strcmp (u->files[f].state, "refused") == 0
                                                               ? "warn" : "idle");
        dash_put_html (out, u->files[f].state);
        fputs ("</span></td><td>", out);
        dash_put_html (out, u->files[f].why);
        fputs ("</td></tr>", out);
    }
    fputs ("</table>", out);
    if (u->nfiles < u->waiting + u->refused)
        fprintf (out, "<div class=\"note\">The first %d named; <span class=\"mono\">pivctl "
                 "status</span> says the same.</div>", u->nfiles);
    fputs ("</div>", out);
}

static void
s_experiments_table (FILE *out, const dash_t *dash)
{
    fprintf (out, "<div class=\"card\" id=\"experiments\"><h2>Experiments<span class=\"n\">%d"
                  "</span></h2>",
             dash->nexps);
    if (dash->nexps == 0) {
        fputs ("<div class=\"empty\">No experiment yet: a directory under the watch root "
               "becomes one when its first frame lands.</div></div>",
               out);
        return;
    }
    fputs ("<table><tr><th>Experiment</th><th>State</th><th>Progress</th>"
           "<th class=\"num\">Pending</th><th class=\"num\">In flight</th>"
           "<th class=\"num\">Failed</th><th class=\"num\">Rate 10 s</th>"
           "<th class=\"num\">Rate 1 min</th><th class=\"num\">Latency p50</th>"
           "<th class=\"num\">p99</th><th class=\"num\">Queue</th><th>Policy</th>"
           "<th>Rate limit</th></tr>",
           out);
    for (int i = dash->nexps - 1; i >= 0; i--) {
        const dash_exp_t *x = &dash->exps[i];
        fputs ("<tr class=\"exp\"><td>", out);
        s_exp_link (out, x->name);
        if (strcmp (x->source, x->name) != 0) {
            fputs ("<div class=\"mute\" style=\"font-size:12px\">replay of ", out);
            dash_put_html (out, x->source);
            fputs ("</div>", out);
        }
        s_unpaired_line (out, x);
        fputs ("</td><td>", out);
        s_exp_state (out, x);
        fputs ("</td><td>", out);
        s_progress (out, x);
        fprintf (out, "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>",
                 (long long) x->pairs[STORE_PENDING], (long long) x->pairs[STORE_DISPATCHED]);
        fprintf (out, "<td class=\"num%s\">%lld</td><td class=\"num\">",
                 x->pairs[STORE_FAILED] ? " err" : "", (long long) x->pairs[STORE_FAILED]);
        s_rate (out, x->rate_10s);
        fputs ("<span class=\"mute\"> /s</span></td><td class=\"num\">", out);
        s_rate (out, x->rate_1m);
        fputs ("<span class=\"mute\"> /s</span></td><td class=\"num\">", out);
        s_ms (out, x->latency_median_ms);
        fputs ("</td><td class=\"num\">", out);
        s_ms (out, x->latency_p99_ms);
        fputs ("</td><td class=\"num\">", out);
        if (x->queue >= 0)
            fprintf (out, "%lld", (long long) x->queue);
        else
            fputs (S_DASH, out);
        fputs ("</td><td>", out);
        dash_put_html (out, x->policy);
        fputs ("</td><td>", out);
        s_limit (out, x->rate_limit);
        fputs ("</td></tr>", out);
    }
    fputs ("</table></div>", out);
}

static void
s_agents_table (FILE *out, const dash_t *dash)
{
    int alive = 0;
    for (int i = 0; i < dash->nagents; i++)
        alive += dash->agents[i].alive == 1;
    fprintf (out, "<div class=\"card\" id=\"agents\"><h2>Agents<span class=\"n\">%d alive of "
                  "%d</span></h2>",
             alive, dash->nagents);
    if (dash->nagents == 0) {
        fputs ("<div class=\"empty\">No agent has connected.</div></div>", out);
        return;
    }
    fputs ("<table><tr><th>Agent</th><th>Host</th><th>State</th><th class=\"num\">Threads</th>"
           "<th class=\"num\">Tasks in hand</th><th class=\"num\">Tasks done</th>"
           "<th>Last heartbeat</th><th>Last activity</th></tr>",
           out);
    for (int i = 0; i < dash->nagents; i++) {
        const dash_agent_t *a = &dash->agents[i];
        fputs ("<tr class=\"agent\"><td class=\"mono\">", out);
        dash_put_html (out, a->id);
        fputs ("</td><td>", out);
        if (a->host[0])
            dash_put_html (out, a->host);
        else
            fputs (S_DASH, out);
        fputs ("</td><td>", out);
        s_agent_state (out, a);
        fputs ("</td><td class=\"num\">", out);
        if (a->cores >= 0)
            fprintf (out, "%d", a->cores);
        else
            fputs (S_DASH, out);
        fputs ("</td><td class=\"num\">", out);
        if (a->tasks >= 0)
            fprintf (out, "%d", a->tasks);
        else
            fputs (S_DASH, out);
        fprintf (out, "</td><td class=\"num\">%lld</td><td>", (long long) a->done);
        s_ago (out, a->heartbeat_s);
        fputs ("</td><td class=\"mute\">", out);
        s_clock (out, a->last_seen_ns, dash->now_ns);
        fputs ("</td></tr>", out);
    }
    fputs ("</table>", out);
    if (!dash->broker_ok)
        fputs ("<div class=\"note\">Without the broker, agents are those named in the log; "
               "tasks done count their results in it.</div>",
               out);
    fputs ("</div>", out);
}

static void
s_failures_table (FILE *out, const dash_t *dash)
{
    fprintf (out, "<div class=\"card\" id=\"failures\"><h2>Latest failures<span class=\"n\">%d"
                  "</span></h2>",
             dash->nfailures);
    if (dash->nfailures == 0) {
        fputs ("<div class=\"empty\">No failed pair.</div></div>", out);
        return;
    }
    fputs ("<table><tr><th>When</th><th>Experiment</th><th>Pair</th><th>Agent</th>"
           "<th class=\"num\">Attempts</th><th>Reason</th></tr>",
           out);
    for (int i = 0; i < dash->nfailures; i++) {
        const dash_failure_t *f = &dash->failures[i];
        fputs ("<tr class=\"failure\"><td>", out);
        s_clock (out, f->finished_ns, dash->now_ns);
        fputs ("</td><td>", out);
        s_exp_link (out, f->experiment);
        fputs ("</td><td class=\"mono\">", out);
        dash_put_html (out, f->stem);
        fputs ("</td><td class=\"mono\">", out);
        dash_put_html (out, f->agent);
        fprintf (out, "</td><td class=\"num\">%d</td><td class=\"err mono\">", f->attempts);
        dash_put_html (out, f->error);
        fputs ("</td></tr>", out);
    }
    fputs ("</table></div>", out);
}

// ---------------------------------------------------------------------------
// Charts

// The latest field as arrows, in the experiment's convention: axes from
// the calibration's origin (mm, y as configured; px when not calibrated),
// speeds in its velocity unit. Drawn as the camera sees the flow (image
// rows downward): an arrow points where the flow goes whatever y_axis says.
static void
s_quiver (FILE *out, const dash_page_t *page)
{
    const piv_field_t *f = page->field;
    const piv_calib_t *c = &page->calib;
    int stride = dash_quiver_stride (f);
    // The extent of the grid, half a step beyond the outer vectors.
    float step = f->step > 0 ? (float) f->step : 1;
    dash_plot_t fr = {.x0 = f->x[0] - step / 2, .y0 = f->y[0] - step / 2,
                      .x1 = f->x[f->nx * f->ny - 1] + step / 2,
                      .y1 = f->y[f->nx * f->ny - 1] + step / 2, .left = 64, .top = 10};
    double w = fmax (fr.x1 - fr.x0, 1), h = fmax (fr.y1 - fr.y0, 1);
    fr.pw = 600, fr.ph = fr.pw * h / w;
    if (fr.ph > 600)
        fr.ph = 600, fr.pw = fr.ph * w / h;
    fr.k = fr.pw / w;
    double vw = fr.left + fr.pw + 12, vh = fr.top + fr.ph + 130;
    // Speeds as shown: px/frame times the calibration's m/s per px/frame.
    double per, unused;
    piv_calib_velocity (c, 1, 0, &per, &unused);
    const char *unit = piv_calib_unit (c, PIV_UNIT_VELOCITY);
    double max_speed = 0;
    int shown = 0;
    for (int j = 0; j < f->ny; j += stride)
        for (int i = 0; i < f->nx; i += stride) {
            int n = j * f->nx + i;
            if (f->flags[n] != PIV_FLAG_INVALID && isfinite (f->u[n]) && isfinite (f->v[n])) {
                double sp = hypot (f->u[n], f->v[n]);
                max_speed = sp > max_speed ? sp : max_speed;
                shown++;
            }
        }
    // The longest arrow spans 0.9 of the spacing of the arrows shown.
    double a = max_speed > 0 ? 0.9 * stride * step * fr.k / max_speed : 0;
    fprintf (out,
             "<svg class=\"quiver\" data-vectors=\"%d\" data-stride=\"%d\" data-unit=\"%s\" "
             "data-position-unit=\"%s\" data-y-axis=\"%s\" viewBox=\"0 0 %.0f %.0f\" "
             "width=\"100%%\" style=\"max-width:%.0fpx\" role=\"img\" "
             "xmlns=\"http://www.w3.org/2000/svg\">",
             shown, stride, unit, dash_axis_unit (c), c->set && c->y_up ? "up" : "down", vw, vh, vw);
    fprintf (out,
             "<title>Vector field, %d x %d vectors, %d shown</title>"
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fbfcfe\" "
             "stroke=\"#c9d0dc\"/>",
             f->nx, f->ny, shown, fr.left, fr.top, fr.pw, fr.ph);
    fputs ("<g fill=\"none\" stroke-linecap=\"round\" stroke-linejoin=\"round\" "
           "stroke-width=\"1.4\">",
           out);
    for (int j = 0; j < f->ny; j += stride)
        for (int i = 0; i < f->nx; i += stride) {
            int n = j * f->nx + i;
            double px = fr.left + (f->x[n] - fr.x0) * fr.k, py = fr.top + (f->y[n] - fr.y0) * fr.k;
            if (f->flags[n] == PIV_FLAG_INVALID || !isfinite (f->u[n]) || !isfinite (f->v[n])) {
                fprintf (out,
                         "<path class=\"invalid\" d=\"M%.1f %.1fl4 4m0-4l-4 4\" "
                         "transform=\"translate(-2 -2)\" stroke=\"#c62828\"/>",
                         px, py);
                continue;
            }
            double sp = hypot (f->u[n], f->v[n]);
            double dx = f->u[n] * a, dy = f->v[n] * a, len = hypot (dx, dy);
            char colour[8];
            dash_viridis (max_speed > 0 ? sp / max_speed : 0, colour);
            // A shaft and an open head, 30 degrees, a third of the arrow.
            double hl = len * 0.33 < 6 ? len * 0.33 : 6;
            double ux = len > 0 ? dx / len : 0, uy = len > 0 ? dy / len : 0;
            double hx = px + dx, hy = py + dy;
            fprintf (out,
                     "<path class=\"arrow\" stroke=\"%s\"%s d=\"M%.1f %.1fL%.1f %.1fM%.1f "
                     "%.1fL%.1f %.1fL%.1f %.1f\"/>",
                     colour, f->flags[n] == PIV_FLAG_REPLACED ? " stroke-dasharray=\"2 1.5\"" : "",
                     px, py, hx, hy, hx - hl * (0.866 * ux - 0.5 * uy),
                     hy - hl * (0.866 * uy + 0.5 * ux), hx, hy,
                     hx - hl * (0.866 * ux + 0.5 * uy), hy - hl * (0.866 * uy - 0.5 * ux));
        }
    fputs ("</g>", out);
    dash_plot_axes (out, &fr, c);
    // Legend: a reference arrow of a round speed in the unit shown, and
    // the colour scale.
    double ly = fr.top + fr.ph + 58, top = max_speed * per;
    double ref = dash_nice (top / 2), rl = per > 0 ? ref / per * a : 0;
    char text[64];
    fprintf (out, "<g font-size=\"12\" fill=\"#1d2433\"><text x=\"%.1f\" y=\"%.1f\">scale</text>",
             fr.left, ly + 4);
    if (rl > 0)
        fprintf (out,
                 "<path class=\"ref\" d=\"M%.1f %.1fh%.1fm-5 -3l5 3l-5 3\" stroke=\"#1d2433\" "
                 "stroke-width=\"1.6\" fill=\"none\"/><text class=\"ref-label\" x=\"%.1f\" "
                 "y=\"%.1f\">%s</text>",
                 fr.left + 42, ly, rl, fr.left + 50 + rl, ly + 4,
                 dash_si (ref, ref, ref, unit, text, sizeof text));
    double cx = fr.left + fr.pw - 220;
    fputs ("<defs><linearGradient id=\"viridis\">", out);
    for (int k = 0; k <= 8; k++) {
        char colour[8];
        dash_viridis (k / 8.0, colour);
        fprintf (out, "<stop offset=\"%.3f\" stop-color=\"%s\"/>", k / 8.0, colour);
    }
    fprintf (out,
             "</linearGradient></defs><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">|V|</text>"
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"200\" height=\"10\" rx=\"2\" "
             "fill=\"url(#viridis)\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
             "fill=\"#6b7385\">0</text><text class=\"tick-max\" x=\"%.1f\" y=\"%.1f\" "
             "font-size=\"11\" fill=\"#6b7385\" text-anchor=\"end\">%s</text></g>",
             cx - 8, ly + 4, cx, ly - 5, cx, ly + 20, cx + 200, ly + 20,
             dash_si (top, top, top / 100, unit, text, sizeof text));
    if (c->set)
        fprintf (out,
                 "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#6b7385\">Velocity "
                 "over dt; positions from the origin (%g, %g) px, y %s as calibrated; drawn as "
                 "the camera sees the flow.</text></svg>",
                 fr.left, ly + 40, c->origin_x, c->origin_y, c->y_up ? "up" : "down");
    else
        fprintf (out,
                 "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#6b7385\">Displacement "
                 "frame A \xE2\x86\x92 B in px; image pixels, y downward as in the image.</text>"
                 "</svg>",
                 fr.left, ly + 40);
}

// A small chart frame: plot area and the y axis labels; returns the plot
// box through the pointers.
typedef struct {
    double x, y, w, h;  // plot area
    double lo, hi;      // y range
} s_box_t;

// Ticks in SI (dash_si): 'unit' on every tick when 'every' (a prefix may
// be on it: "10 µm/s"), else on the top one only ("2 /s").
static void
s_chart_open (FILE *out, const char *id, s_box_t *b, double lo, double hi, const char *unit,
              int every)
{
    *b = (s_box_t) {.x = 96, .y = 10, .w = 354, .h = 110, .lo = lo, .hi = hi};
    double step = (hi - lo) / 2, mag = fmax (fabs (lo), fabs (hi));
    fprintf (out,
             "<svg class=\"chart\" id=\"%s\" data-unit=\"%s\" viewBox=\"0 0 460 150\" "
             "width=\"100%%\" xmlns=\"http://www.w3.org/2000/svg\"><g font-size=\"10.5\" "
             "fill=\"#6b7385\">",
             id, unit);
    for (int t = 0; t <= 2; t++) {
        double v = lo + (hi - lo) * t / 2, y = b->y + b->h - b->h * t / 2;
        char text[64];
        fprintf (out,
                 "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e7ee\"/>"
                 "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>",
                 b->x, b->x + b->w, y, y, b->x - 5, y + 3.5,
                 dash_si (v, mag, step, every || t == 2 ? unit : "", text, sizeof text));
    }
}

static double
s_chart_y (const s_box_t *b, double v)
{
    double span = b->hi - b->lo > 0 ? b->hi - b->lo : 1;
    return b->y + b->h - b->h * (v - b->lo) / span;
}

static void
s_rate_chart (FILE *out, const dash_page_t *page)
{
    double peak = 0;
    for (int i = 0; i < DASH_BUCKETS; i++)
        peak = page->buckets[i] > peak ? (double) page->buckets[i] : peak;
    s_box_t b;
    s_chart_open (out, "rate-history", &b, 0, dash_nice (peak / DASH_BUCKET_S * 1.1), "/s", 0);
    double bw = b.w / DASH_BUCKETS;
    int64_t width_ns = (int64_t) DASH_BUCKET_S * 1000000000;
    for (int i = 0; i < DASH_BUCKETS; i++) {
        int64_t start = page->buckets_end_ns - (int64_t) (DASH_BUCKETS - i) * width_ns;
        if (page->tail_start_ns && start < page->tail_start_ns) {
            fprintf (out,
                     "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                     "fill=\"#f1f3f6\"/>",
                     b.x + i * bw, b.y, bw, b.h);
            continue;
        }
        double r = (double) page->buckets[i] / DASH_BUCKET_S;
        double y = s_chart_y (&b, r);
        fprintf (out,
                 "<rect class=\"bucket\" data-results=\"%lld\" x=\"%.1f\" y=\"%.1f\" "
                 "width=\"%.1f\" height=\"%.1f\" rx=\"1.5\" fill=\"#2458c6\"/>",
                 (long long) page->buckets[i], b.x + i * bw + 1, y, bw - 2, b.y + b.h - y);
    }
    fprintf (out,
             "<text x=\"%.1f\" y=\"140\">%d min ago</text><text x=\"%.1f\" y=\"140\" "
             "text-anchor=\"end\">now</text></g></svg>",
             b.x, DASH_BUCKETS * DASH_BUCKET_S / 60, b.x + b.w);
}

static void
s_feedback_chart (FILE *out, const dash_page_t *page, int64_t now_ns)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < page->npoints; i++) {
        const dash_point_t *p = &page->series[i];
        lo = fmin (lo, p->value), hi = fmax (hi, p->value);
        if (isfinite (p->setpoint))
            lo = fmin (lo, p->setpoint), hi = fmax (hi, p->setpoint);
    }
    if (hi - lo < 1e-9) {
        double m = fabs (hi) > 0 ? fabs (hi) * 0.05 : 0.5;
        lo -= m, hi += m;
    }
    double margin = (hi - lo) * 0.08;
    s_box_t b;
    s_chart_open (out, "feedback-series", &b, lo - margin, hi + margin, page->feedback_unit, 1);
    int64_t t0 = page->series[0].t_ns, t1 = page->series[page->npoints - 1].t_ns;
    double span = t1 > t0 ? (double) (t1 - t0) : 1;
    fputs ("<polyline fill=\"none\" stroke=\"#2458c6\" stroke-width=\"1.6\" "
           "stroke-linejoin=\"round\" points=\"",
           out);
    for (int i = 0; i < page->npoints; i++) {
        const dash_point_t *p = &page->series[i];
        double x = page->npoints > 1 ? b.x + b.w * (double) (p->t_ns - t0) / span : b.x + b.w;
        fprintf (out, "%s%.1f,%.1f", i ? " " : "", x, s_chart_y (&b, p->value));
    }
    fputs ("\"/>", out);
    const dash_point_t *last = &page->series[page->npoints - 1];
    if (isfinite (last->setpoint))
        fprintf (out,
                 "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#b26a00\" "
                 "stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                 "fill=\"#b26a00\">setpoint</text>",
                 b.x, b.x + b.w, s_chart_y (&b, last->setpoint), s_chart_y (&b, last->setpoint),
                 b.x + b.w, s_chart_y (&b, last->setpoint) - 3);
    fprintf (out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#2458c6\"/>", b.x + b.w,
             s_chart_y (&b, last->value));
    fprintf (out, "<text x=\"%.1f\" y=\"140\">", b.x);
    s_clock (out, t0, now_ns);
    fprintf (out, "</text><text x=\"%.1f\" y=\"140\" text-anchor=\"end\">", b.x + b.w);
    s_clock (out, t1, now_ns);
    fputs ("</text></g></svg>", out);
}

// ---------------------------------------------------------------------------
// Pages

static void
s_overview (FILE *out, const dash_t *dash)
{
    int64_t done = 0, total = 0, failed = 0, waiting = 0;
    double rate10 = 0, rate60 = 0;
    for (int i = 0; i < dash->nexps; i++) {
        const dash_exp_t *x = &dash->exps[i];
        done += x->pairs[STORE_DONE], total += x->total, failed += x->pairs[STORE_FAILED];
        waiting += x->pairs[STORE_PENDING] + x->pairs[STORE_DISPATCHED];
        rate10 += isfinite (x->rate_10s) ? x->rate_10s : 0;
        rate60 += isfinite (x->rate_1m) ? x->rate_1m : 0;
    }
    if (dash->broker_ok)
        rate10 = dash->rate_10s, rate60 = dash->rate_1m;
    int alive = 0;
    for (int i = 0; i < dash->nagents; i++)
        alive += dash->agents[i].alive == 1;
    fputs ("<div class=\"tiles\">", out);
    s_tile (out, "Processing rate");
    s_rate (out, rate10);
    fputs ("<small>pairs/s</small>", out);
    char sub[128];
    snprintf (sub, sizeof sub, "over 10 s \xC2\xB7 %.2f pairs/s over 1 min", rate60);
    s_tile_end (out, sub);
    s_tile (out, "Pairs done");
    fprintf (out, "%lld<small>of %lld</small>", (long long) done, (long long) total);
    snprintf (sub, sizeof sub, "%lld waiting or in flight", (long long) waiting);
    s_tile_end (out, sub);
    s_tile (out, "Queue");
    if (dash->broker_ok)
        fprintf (out, "%lld<small>pairs</small>", (long long) dash->queue);
    else
        fputs (S_DASH, out);
    fputs ("</div><div class=\"s\">policy ", out);
    dash_put_html (out, dash->policy);
    fputs (", ", out);
    s_limit (out, dash->rate_limit);
    fputs (dash->paused ? ", <b style=\"color:var(--warn)\">paused</b>" : "", out);
    fputs ("</div></div>", out);
    s_tile (out, "Agents alive");
    fprintf (out, "<span style=\"color:%s\">%d</span><small>of %d</small>",
             alive ? "var(--ok)" : "var(--bad)", alive, dash->nagents);
    s_tile_end (out, dash->broker_ok        ? "as the broker sees them"
                     : dash->broker_status ? "the broker answered with an error"
                                           : "broker unreachable");
    s_tile (out, "Failed pairs");
    fprintf (out, "<span style=\"color:%s\">%lld</span>", failed ? "var(--bad)" : "var(--ok)",
             (long long) failed);
    s_tile_end (out, failed ? "see the reasons below" : "none");
    fputs ("</div>", out);
    s_experiments_table (out, dash);
    s_agents_table (out, dash);
    s_failures_table (out, dash);
}

static void
s_experiment_page (FILE *out, const dash_t *dash)
{
    const dash_page_t *page = dash->page;
    const dash_exp_t *x = page->exp;
    fputs ("<div class=\"tiles\">", out);
    s_tile (out, "Progress");
    fprintf (out, "%lld<small>of %lld pairs</small>", (long long) x->pairs[STORE_DONE],
             (long long) x->total);
    fputs ("</div><div class=\"s\">", out);
    s_exp_state (out, x);
    fprintf (out, " %lld pending, %lld in flight, %lld skipped</div></div>",
             (long long) x->pairs[STORE_PENDING], (long long) x->pairs[STORE_DISPATCHED],
             (long long) x->pairs[STORE_SKIPPED]);
    s_tile (out, "Rate 10 s");
    s_rate (out, x->rate_10s);
    fputs ("<small>pairs/s</small></div><div class=\"s\">", out);
    s_rate (out, x->rate_1m);
    fputs (" pairs/s over 1 min</div></div>", out);
    s_tile (out, "Latency p50");
    s_ms (out, x->latency_median_ms);
    fputs ("</div><div class=\"s\">p99 ", out);
    s_ms (out, x->latency_p99_ms);
    fputs (" \xC2\xB7 camera close \xE2\x86\x92 result</div></div>", out);
    s_tile (out, "Queue");
    if (x->queue >= 0)
        fprintf (out, "%lld<small>pairs</small>", (long long) x->queue);
    else
        fputs (S_DASH, out);
    fputs ("</div><div class=\"s\">policy ", out);
    dash_put_html (out, x->policy);
    fputs (", ", out);
    s_limit (out, x->rate_limit);
    fputs ("</div></div>", out);
    s_tile (out, "Failed");
    fprintf (out, "<span style=\"color:%s\">%lld</span><small>pairs</small>",
             x->pairs[STORE_FAILED] ? "var(--bad)" : "var(--ok)",
             (long long) x->pairs[STORE_FAILED]);
    s_tile_end (out, NULL);
    fputs ("</div>", out);
    s_unpaired_card (out, x);
    fputs ("<div class=\"grid2\"><div class=\"card\" id=\"field\"><h2>Latest vector field",
           out);
    if (page->field) {
        fputs ("<span class=\"n mono\">", out);
        dash_put_html (out, page->field_stem);
        int stride = dash_quiver_stride (page->field);
        fprintf (out, " \xC2\xB7 %d \xC3\x97 %d vectors, %d px step", page->field->nx,
                 page->field->ny, page->field->step);
        if (stride > 1)
            fprintf (out, " \xC2\xB7 every %d%s shown", stride,
                     stride == 2 ? "nd" : stride == 3 ? "rd" : "th");
        fputs ("</span></h2>", out);
        s_quiver (out, page);
    }
    else {
        fputs ("</h2><div class=\"empty\">", out);
        dash_put_html (out, page->field_note);
        fputs ("</div>", out);
    }
    fputs ("</div><div><div class=\"card\"><h2>Processing rate<span class=\"n\">results per "
           "second, 10 s bins</span></h2>",
           out);
    s_rate_chart (out, page);
    if (page->tail_start_ns)
        fputs ("<div class=\"note\">Grey: older than the part of the log read.</div>", out);
    fputs ("</div><div class=\"card\"><h2>Feedback", out);
    if (page->npoints > 0) {
        const char *q = page->quantity ? page->quantity : "value";
        fputs ("<span class=\"n\">", out);
        dash_put_html (out, q);
        if (page->feedback_unit[0]) {
            fputs (" (", out);
            dash_put_html (out, page->feedback_unit);
            fputs (")", out);
        }
        fprintf (out, ", last %d results</span></h2>", page->npoints);
        s_feedback_chart (out, page, dash->now_ns);
        const dash_point_t *last = &page->series[page->npoints - 1];
        char text[64];
        double mag = fabs (last->value);
        fprintf (out, "<div class=\"note\">latest <span class=\"latest\">%s</span>",
                 dash_si (last->value, mag, mag / 1000, page->feedback_unit, text, sizeof text));
        if (isfinite (last->setpoint)) {
            mag = fabs (last->setpoint);
            fprintf (out, " \xC2\xB7 setpoint %s",
                     dash_si (last->setpoint, mag, mag / 1000, page->feedback_unit, text,
                              sizeof text));
        }
        if (isfinite (last->output))
            fprintf (out, " \xC2\xB7 controller output %.4g", last->output);
        fputs ("</div>", out);
    }
    else
        fputs ("</h2><div class=\"empty\">No feedback in the log yet.</div>", out);
    fputs ("</div></div></div>", out);
    dash_maps_html (dash, out);
    s_failures_table (out, dash);
}

void
dash_html (const dash_t *dash, FILE *out)
{
    s_head (out, dash, dash->page ? dash->page->exp->name : "status");
    if (dash->page)
        s_experiment_page (out, dash);
    else
        s_overview (out, dash);
    s_foot (out, dash);
}

void
dash_html_error (FILE *out, const char *status, const char *message)
{
    fputs ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", out);
    dash_put_html (out, status);
    fputs (" \xC2\xB7 pivfarm</title><style>", out);
    fputs (s_css, out);
    fputs ("</style></head><body><header><h1><a href=\"?\" style=\"color:#fff\">pivfarm</a>"
           "</h1></header><main><div class=\"card\"><h2>",
           out);
    dash_put_html (out, status);
    fputs ("</h2><p>", out);
    dash_put_html (out, message);
    fputs ("</p><p><a href=\"?\">Back to the overview</a></p></div></main></body></html>\n", out);
}
