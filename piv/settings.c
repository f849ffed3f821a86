// settings.c — the PIV core's settings: defaults, the engine's ranges, the
// TASK text the broker writes and agents read, and the configuration file's
// rules for the [piv] keys. See settings.h.

#include "piv/settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The interpolators by name, in piv_deform_t order, and in words.
static const char *const s_deform_names[] = {"offset", "bilinear", "bicubic", "bspline",
                                             "bspline5", "omoms"};
#define S_DEFORM_WORDS "offset, bilinear, bicubic, bspline, bspline5 or omoms"

void
piv_settings_init (piv_settings_t *settings)
{
    memset (settings, 0, sizeof *settings);
    settings->passes[0] = 32;
    settings->npasses = 1;
    settings->overlap = 50;
    settings->final_iterations = 3;
    settings->converge = 0.1;
    settings->deform = PIV_DEFORM_BSPLINE5;
    settings->symmetric = 1;
    settings->median_eps = 0.1;
    settings->median_threshold = 2.0;
    settings->threads = 1;
    settings->smooth_predictor = 1;
    settings->deform_every_pass = 0;
    settings->median_passes = 1;
    settings->median_curved = 1;
    settings->contrast = 0.2;
    settings->cbc = 0.5;
    settings->smooth = PIV_SMOOTH_FINAL;
    settings->smooth_s = 0;
    settings->subpixel = PIV_SUBPIXEL_GAUSS3;
    // cs unless a single run (issue 27: doc/piv.md, "The default"); every
    // field with it grows 8 bytes a vector.
    settings->uncertainty = PIV_UNCERTAINTY_AUTO;
}

// The index of 'name' among the count names, or -1: the settings' choices
// (deformation, smoothing, sub-pixel estimator) are enums in their lists'
// order.
static int
s_name_index (const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp (name, names[i]) == 0)
            return i;
    return -1;
}

// The sub-pixel estimators by name, in piv_subpixel_t order.
static const char *const s_subpixel_names[] = {"gauss3", "gauss2d"};

int
piv_subpixel_parse (const char *name, piv_subpixel_t *subpixel, char *err, size_t errlen)
{
    int i = s_name_index (s_subpixel_names, 2, name);
    if (i >= 0) {
        *subpixel = (piv_subpixel_t) i;
        return 0;
    }
    snprintf (err, errlen, "bad settings: subpixel '%s': expected gauss3 or gauss2d", name);
    return -1;
}

const char *
piv_subpixel_name (piv_subpixel_t subpixel)
{
    return (unsigned) subpixel < 2 ? s_subpixel_names[subpixel] : "?";
}

// The uncertainty methods by name, in piv_uncertainty_t order.
static const char *const s_uncertainty_names[] = {"off", "cs", "mc", "auto"};

int
piv_uncertainty_parse (const char *name, piv_uncertainty_t *method, char *err, size_t errlen)
{
    int i = s_name_index (s_uncertainty_names, 4, name);
    if (i >= 0) {
        *method = (piv_uncertainty_t) i;
        return 0;
    }
    snprintf (err, errlen, "bad settings: uncertainty '%s': expected auto, off, cs or mc", name);
    return -1;
}

const char *
piv_uncertainty_name (piv_uncertainty_t method)
{
    return (unsigned) method < 4 ? s_uncertainty_names[method] : "?";
}

piv_uncertainty_t
piv_uncertainty_method (const piv_settings_t *settings)
{
    if (settings->uncertainty != PIV_UNCERTAINTY_AUTO)
        return settings->uncertainty;
    // One run (a single pass, one iteration) is the latency choice, which
    // cs would make half as long again.
    int runs = settings->npasses > 1 || settings->final_iterations > 1;
    return runs ? PIV_UNCERTAINTY_CS : PIV_UNCERTAINTY_OFF;
}

// The smoothing modes by name, in piv_smooth_t order.
static const char *const s_smooth_names[] = {"off", "predictor", "final", "both"};

int
piv_smooth_parse (const char *name, piv_smooth_t *smooth, char *err, size_t errlen)
{
    int i = s_name_index (s_smooth_names, 4, name);
    if (i >= 0) {
        *smooth = (piv_smooth_t) i;
        return 0;
    }
    snprintf (err, errlen, "bad smooth '%s': expected off, predictor, final or both", name);
    return -1;
}

const char *
piv_smooth_name (piv_smooth_t smooth)
{
    return (unsigned) smooth < 4 ? s_smooth_names[smooth] : "?";
}

// A window size the engine plans for: an even size from 8 to 256 (FFTW
// plans any size; powers of two are the fastest, 24, 48, 96 close behind;
// odd sizes would have no centre pixel between the lags).
static int
s_window_ok (long n)
{
    return n >= 8 && n <= PIV_MAX_WINDOW && n % 2 == 0;
}

int
piv_settings_set_passes (piv_settings_t *settings, const char *list, char *err, size_t errlen)
{
    int sizes[PIV_MAX_PASSES], count = 0;
    const char *p = list;
    while (p && *p) {
        char *end;
        errno = 0;
        long n = strtol (p, &end, 10);
        if (end == p || errno || (*end && *end != ',')) {
            snprintf (err, errlen, "bad passes '%s': expected window sizes like 64,32,16", list);
            return -1;
        }
        if (!s_window_ok (n)) {
            snprintf (err, errlen, "bad passes '%s': %ld is not an even window size from 8 to %d",
                      list, n, PIV_MAX_WINDOW);
            return -1;
        }
        if (count == PIV_MAX_PASSES) {
            snprintf (err, errlen, "bad passes '%s': at most %d passes", list, PIV_MAX_PASSES);
            return -1;
        }
        if (count > 0 && n > sizes[count - 1]) {
            snprintf (err, errlen, "bad passes '%s': window sizes must not grow", list);
            return -1;
        }
        sizes[count++] = (int) n;
        p = *end ? end + 1 : end;
    }
    if (count == 0) {
        snprintf (err, errlen, "bad passes '%s': no window size", list ? list : "");
        return -1;
    }
    memcpy (settings->passes, sizes, sizeof sizes);
    settings->npasses = count;
    return 0;
}

// What a mask's path may not be, in a few words, or NULL if it is fine:
// the TASK text is split at spaces, and a control character in a path is
// never meant. 'absolute' asks for a leading '/'.
static const char *
s_mask_path_why (const char *path, int absolute)
{
    if (strlen (path) >= PIV_MASK_PATH_MAX)
        return "is too long";
    if (absolute && path[0] != '/')
        return "is not an absolute path";
    for (const unsigned char *p = (const unsigned char *) path; *p; p++)
        if (*p == ' ')
            return "holds a space";
        else if (*p < 0x20 || *p == 0x7f)
            return "holds a control character";
    return NULL;
}

int
piv_settings_set_mask (piv_settings_t *settings, const char *path, char *err, size_t errlen)
{
    if (!*path || strcmp (path, "none") == 0) {
        settings->mask_path[0] = '\0';
        return 0;
    }
    const char *why = s_mask_path_why (path, 1);
    if (why) {
        snprintf (err, errlen, "bad settings: mask '%.300s' %s", path, why);
        return -1;
    }
    snprintf (settings->mask_path, sizeof settings->mask_path, "%s", path);
    return 0;
}

int
piv_deform_parse (const char *name, piv_deform_t *deform, char *err, size_t errlen)
{
    int i = s_name_index (s_deform_names, PIV_DEFORM_KINDS, name);
    if (i >= 0) {
        *deform = (piv_deform_t) i;
        return 0;
    }
    snprintf (err, errlen, "bad deformation '%s': expected " S_DEFORM_WORDS, name);
    return -1;
}

const char *
piv_deform_name (piv_deform_t deform)
{
    return (unsigned) deform < PIV_DEFORM_KINDS ? s_deform_names[deform] : "?";
}

int
piv_settings_check (const piv_settings_t *settings, char *err, size_t errlen)
{
    const piv_settings_t *s = settings;
    if (s->npasses < 1 || s->npasses > PIV_MAX_PASSES) {
        snprintf (err, errlen, "bad settings: %d passes (1 to %d)", s->npasses, PIV_MAX_PASSES);
        return -1;
    }
    for (int i = 0; i < s->npasses; i++)
        if (!s_window_ok (s->passes[i]) || (i > 0 && s->passes[i] > s->passes[i - 1])) {
            snprintf (err, errlen,
                      "bad settings: passes: window %d of pass %d (even sizes 8 to 256, not "
                      "growing)",
                      s->passes[i], i + 1);
            return -1;
        }
    if (s->overlap < 0 || s->overlap > PIV_MAX_OVERLAP) {
        snprintf (err, errlen, "bad settings: overlap %d %% (0 to %d)", s->overlap,
                  PIV_MAX_OVERLAP);
        return -1;
    }
    if (s->final_iterations < 1 || s->final_iterations > PIV_MAX_ITERATIONS) {
        snprintf (err, errlen, "bad settings: %d final iterations (1 to %d)",
                  s->final_iterations, PIV_MAX_ITERATIONS);
        return -1;
    }
    if (!(s->converge >= 0)) {
        snprintf (err, errlen, "bad settings: convergence %g px (0 or more)", s->converge);
        return -1;
    }
    if (s->threads < 1 || s->threads > PIV_MAX_THREADS) {
        snprintf (err, errlen, "bad settings: %d threads (1 to %d)", s->threads,
                  PIV_MAX_THREADS);
        return -1;
    }
    if ((unsigned) s->deform >= PIV_DEFORM_KINDS) {
        snprintf (err, errlen, "bad settings: deform %d", (int) s->deform);
        return -1;
    }
    // Each validation key by its name: 'pivctl piv' and the file quote it.
    if (!(s->median_threshold > 0)) {
        snprintf (err, errlen, "bad settings: threshold %g (more than 0)", s->median_threshold);
        return -1;
    }
    if (!(s->median_eps >= 0)) {
        snprintf (err, errlen, "bad settings: eps %g px (0 or more)", s->median_eps);
        return -1;
    }
    if ((unsigned) s->smooth > PIV_SMOOTH_BOTH || !(s->smooth_s >= 0)) {
        snprintf (err, errlen, "bad settings: smooth %d, s %g (0 or more)", (int) s->smooth,
                  s->smooth_s);
        return -1;
    }
    if (!(s->prefilter >= 0 && s->prefilter <= PIV_PREFILTER_MAX)) {
        snprintf (err, errlen, "bad settings: prefilter %g px (0 to %g)", s->prefilter,
                  PIV_PREFILTER_MAX);
        return -1;
    }
    if ((unsigned) s->uncertainty > PIV_UNCERTAINTY_AUTO) {
        snprintf (err, errlen, "bad settings: uncertainty method %d", (int) s->uncertainty);
        return -1;
    }
    if ((unsigned) s->subpixel > PIV_SUBPIXEL_GAUSS2D) {
        snprintf (err, errlen, "bad settings: sub-pixel estimator %d", (int) s->subpixel);
        return -1;
    }
    if (s->median_passes < 1 || s->median_passes > PIV_MAX_ITERATIONS) {
        snprintf (err, errlen, "bad settings: median_passes %d (1 to %d)", s->median_passes,
                  PIV_MAX_ITERATIONS);
        return -1;
    }
    if (!(s->peak_ratio_min >= 0)) {
        snprintf (err, errlen, "bad settings: peak_ratio %g (0 or more)", s->peak_ratio_min);
        return -1;
    }
    if (!(s->contrast >= 0 && s->contrast < 1)) {
        snprintf (err, errlen, "bad settings: contrast %g (0 to less than 1)", s->contrast);
        return -1;
    }
    if (!(s->cbc >= 0 && s->cbc <= 1)) {
        snprintf (err, errlen, "bad settings: cbc %g (0 to 1)", s->cbc);
        return -1;
    }
    if (!(s->cap >= 0 && s->cap <= PIV_CAP_MAX)) {
        snprintf (err, errlen, "bad settings: cap %g (0 to %g)", s->cap, PIV_CAP_MAX);
        return -1;
    }
    if (!(s->highpass >= 0 && s->highpass <= PIV_HIGHPASS_MAX)) {
        snprintf (err, errlen, "bad settings: highpass %g px (0 to %g)", s->highpass,
                  PIV_HIGHPASS_MAX);
        return -1;
    }
    if (s->lcn != 0 && (s->lcn < 3 || s->lcn > PIV_LCN_MAX)) {
        snprintf (err, errlen, "bad settings: lcn %d px (0, or 3 to %d)", s->lcn, PIV_LCN_MAX);
        return -1;
    }
    if ((unsigned) s->background > PIV_BACKGROUND_MEAN
        || (s->background != PIV_BACKGROUND_NONE
            && (s->background_frames < 1 || s->background_frames > PIV_BACKGROUND_MAX))) {
        snprintf (err, errlen, "bad settings: background of %d frames (1 to %d)",
                  s->background_frames, PIV_BACKGROUND_MAX);
        return -1;
    }
    return 0;
}

int
piv_background_parse (const char *text, piv_background_kind_t *kind, int *frames, char *err,
                      size_t errlen)
{
    if (strcmp (text, "none") == 0) {
        *kind = PIV_BACKGROUND_NONE;
        *frames = 0;
        return 0;
    }
    int mean = strncmp (text, "mean:", 5) == 0;
    const char *digits = mean ? text + 5 : strncmp (text, "min:", 4) == 0 ? text + 4 : NULL;
    char *end = NULL;
    long n = digits && isdigit ((unsigned char) *digits) ? strtol (digits, &end, 10) : 0;
    if (!end || *end || n < 1 || n > PIV_BACKGROUND_MAX) {
        snprintf (err, errlen,
                  "bad settings: background '%s': expected none, min:N or mean:N, N from 1 "
                  "to %d",
                  text, PIV_BACKGROUND_MAX);
        return -1;
    }
    *kind = mean ? PIV_BACKGROUND_MEAN : PIV_BACKGROUND_MIN;
    *frames = (int) n;
    return 0;
}

const char *
piv_background_text (piv_background_kind_t kind, int frames, char *buf, size_t size)
{
    if (kind == PIV_BACKGROUND_NONE)
        snprintf (buf, size, "none");
    else
        snprintf (buf, size, "%s:%d", kind == PIV_BACKGROUND_MEAN ? "mean" : "min", frames);
    return buf;
}

// ---------------------------------------------------------------------------
// The TASK text

// The settings' numeric keys of the TASK text, by name: where each is kept,
// or NULL for another key.
static int *
s_int_key (piv_settings_t *s, const char *key)
{
    return strcmp (key, "overlap") == 0         ? &s->overlap
           : strcmp (key, "iterations") == 0    ? &s->final_iterations
           : strcmp (key, "median_passes") == 0 ? &s->median_passes
           : strcmp (key, "lcn") == 0           ? &s->lcn
                                                : NULL;
}

static double *
s_real_key (piv_settings_t *s, const char *key)
{
    return strcmp (key, "peak_ratio") == 0  ? &s->peak_ratio_min
           : strcmp (key, "smooth_s") == 0  ? &s->smooth_s
           : strcmp (key, "contrast") == 0  ? &s->contrast
           : strcmp (key, "cbc") == 0       ? &s->cbc
           : strcmp (key, "eps") == 0       ? &s->median_eps
           : strcmp (key, "threshold") == 0 ? &s->median_threshold
           : strcmp (key, "prefilter") == 0 ? &s->prefilter
           : strcmp (key, "cap") == 0       ? &s->cap
           : strcmp (key, "highpass") == 0  ? &s->highpass
                                            : NULL;
}

// A key of two words: *on 1 for 'yes', 0 for 'no'; anything else refused.
static int
s_choice (const char *key, const char *value, const char *yes, const char *no, int *on,
          char *err, size_t errlen)
{
    if (strcmp (value, yes) != 0 && strcmp (value, no) != 0) {
        // Its words in the order the documentation gives them: the default first.
        snprintf (err, errlen, "bad settings: %s '%s': expected %s or %s", key, value,
                  *on ? yes : no, *on ? no : yes);
        return -1;
    }
    *on = strcmp (value, yes) == 0;
    return 0;
}

int
piv_settings_parse (const char *text, piv_settings_t *s, char *err, size_t errlen)
{
    piv_settings_init (s);
    char copy[512];
    snprintf (copy, sizeof copy, "%s", text);
    const char *mask = NULL;  // the value of the last key if it was mask
    for (char *save, *tok = strtok_r (copy, " ", &save); tok; tok = strtok_r (NULL, " ", &save)) {
        char *eq = strchr (tok, '=');
        if (!eq && mask) {
            // "mask=/rig/my wall.tif": the path went on past a space.
            snprintf (err, errlen, "bad settings: mask '%s %s' holds a space", mask, tok);
            return -1;
        }
        if (!eq) {
            snprintf (err, errlen, "bad settings '%s': '%s' is not key=value", text, tok);
            return -1;
        }
        *eq = '\0';
        const char *key = tok, *value = eq + 1;
        char *end;
        mask = NULL;
        if (strcmp (key, "mask") == 0) {
            if (!*value || piv_settings_set_mask (s, value, err, errlen) != 0) {
                if (!*value)
                    snprintf (err, errlen, "bad settings: mask '' is not an absolute path");
                return -1;
            }
            mask = value;
        }
        else if (strcmp (key, "passes") == 0) {
            if (piv_settings_set_passes (s, value, err, errlen) != 0)
                return -1;
        }
        else if (s_int_key (s, key) || s_real_key (s, key)) {
            // Integers as decimal integers (5.5 is no overlap), reals as reals.
            int *n = s_int_key (s, key);
            long i = n ? strtol (value, &end, 10) : 0;
            double x = n ? 0 : strtod (value, &end);
            if (*end || end == value) {
                snprintf (err, errlen, "bad settings: %s '%s' is not a number", key, value);
                return -1;
            }
            if (n)
                *n = (int) i;
            else
                *s_real_key (s, key) = x;
        }
        else if (strcmp (key, "deform") == 0) {
            if (piv_deform_parse (value, &s->deform, err, errlen) != 0)
                return -1;
        }
        else if (strcmp (key, "smooth") == 0) {
            if (piv_smooth_parse (value, &s->smooth, err, errlen) != 0)
                return -1;
        }
        else if (strcmp (key, "subpixel") == 0) {
            if (piv_subpixel_parse (value, &s->subpixel, err, errlen) != 0)
                return -1;
        }
        else if (strcmp (key, "uncertainty") == 0) {
            if (piv_uncertainty_parse (value, &s->uncertainty, err, errlen) != 0)
                return -1;
        }
        else if (strcmp (key, "background") == 0) {
            if (piv_background_parse (value, &s->background, &s->background_frames, err, errlen)
                != 0)
                return -1;
        }
        else if (strcmp (key, "deform_passes") == 0) {
            // Which passes deform the frames: the final size only, or every
            // pass after the first (the others move windows by whole pixels).
            if (s_choice (key, value, "all", "final", &s->deform_every_pass, err, errlen))
                return -1;
        }
        else if (strcmp (key, "median") == 0) {
            // The median test with its second look where the flow is curved,
            // or the plain test of Westerweel & Scarano.
            if (s_choice (key, value, "curved", "plain", &s->median_curved, err, errlen))
                return -1;
        }
        else if (strcmp (key, "predictor") == 0) {
            // The predictor between passes: 3 x 3 binomial filtered, or raw.
            if (s_choice (key, value, "binomial", "raw", &s->smooth_predictor, err, errlen))
                return -1;
        }
        else {
            snprintf (err, errlen, "bad settings '%s': unknown key '%s'", text, key);
            return -1;
        }
    }
    return 0;
}

// The passes as a list, "64,32,16", into buf; its length or -1.
static int
s_passes_text (const piv_settings_t *s, char *buf, size_t size)
{
    size_t used = 0;
    if (size)
        buf[0] = '\0';
    for (int i = 0; i < s->npasses; i++) {
        int n = snprintf (buf + used, size - used, "%s%d", i ? "," : "", s->passes[i]);
        if (n < 0 || (size_t) n >= size - used)
            return -1;
        used += (size_t) n;
    }
    return (int) used;
}

int
piv_settings_format (const piv_settings_t *s, char *buf, size_t size)
{
    char passes[PIV_MAX_PASSES * 12];
    if (s_passes_text (s, passes, sizeof passes) < 0)
        return -1;
    int n = snprintf (buf, size, "passes=%s overlap=%d iterations=%d deform=%s", passes,
                      s->overlap, s->final_iterations, piv_deform_name (s->deform));
    // Validation and smoothing only where they differ from the defaults.
    piv_settings_t d;
    piv_settings_init (&d);
    if (n >= 0 && (size_t) n < size && s->smooth != d.smooth)
        n += snprintf (buf + n, size - n, " smooth=%s", piv_smooth_name (s->smooth));
    if (n >= 0 && (size_t) n < size && s->smooth_s != d.smooth_s)
        n += snprintf (buf + n, size - n, " smooth_s=%g", s->smooth_s);
    if (n >= 0 && (size_t) n < size && s->median_passes != d.median_passes)
        n += snprintf (buf + n, size - n, " median_passes=%d", s->median_passes);
    if (n >= 0 && (size_t) n < size && s->peak_ratio_min != d.peak_ratio_min)
        n += snprintf (buf + n, size - n, " peak_ratio=%g", s->peak_ratio_min);
    if (n >= 0 && (size_t) n < size && s->contrast != d.contrast)
        n += snprintf (buf + n, size - n, " contrast=%g", s->contrast);
    if (n >= 0 && (size_t) n < size && s->cbc != d.cbc)
        n += snprintf (buf + n, size - n, " cbc=%g", s->cbc);
    if (n >= 0 && (size_t) n < size && s->median_eps != d.median_eps)
        n += snprintf (buf + n, size - n, " eps=%g", s->median_eps);
    if (n >= 0 && (size_t) n < size && s->median_threshold != d.median_threshold)
        n += snprintf (buf + n, size - n, " threshold=%g", s->median_threshold);
    if (n >= 0 && (size_t) n < size && s->deform_every_pass != d.deform_every_pass)
        n += snprintf (buf + n, size - n, " deform_passes=%s",
                       s->deform_every_pass ? "all" : "final");
    if (n >= 0 && (size_t) n < size && s->median_curved != d.median_curved)
        n += snprintf (buf + n, size - n, " median=%s", s->median_curved ? "curved" : "plain");
    if (n >= 0 && (size_t) n < size && s->smooth_predictor != d.smooth_predictor)
        n += snprintf (buf + n, size - n, " predictor=%s",
                       s->smooth_predictor ? "binomial" : "raw");
    if (n >= 0 && (size_t) n < size && s->prefilter != d.prefilter)
        n += snprintf (buf + n, size - n, " prefilter=%g", s->prefilter);
    if (n >= 0 && (size_t) n < size && s->subpixel != d.subpixel)
        n += snprintf (buf + n, size - n, " subpixel=%s", piv_subpixel_name (s->subpixel));
    if (n >= 0 && (size_t) n < size && s->uncertainty != d.uncertainty)
        n += snprintf (buf + n, size - n, " uncertainty=%s", piv_uncertainty_name (s->uncertainty));
    if (n >= 0 && (size_t) n < size && s->cap != d.cap)
        n += snprintf (buf + n, size - n, " cap=%g", s->cap);
    if (n >= 0 && (size_t) n < size && s->highpass != d.highpass)
        n += snprintf (buf + n, size - n, " highpass=%g", s->highpass);
    if (n >= 0 && (size_t) n < size && s->lcn != d.lcn)
        n += snprintf (buf + n, size - n, " lcn=%d", s->lcn);
    char bg[32];
    if (n >= 0 && (size_t) n < size && s->background != d.background)
        n += snprintf (buf + n, size - n, " background=%s",
                       piv_background_text (s->background, s->background_frames, bg, sizeof bg));
    if (n < 0 || (size_t) n >= size)
        return -1;
    if (!s->mask_path[0])
        return n;
    if (s_mask_path_why (s->mask_path, 1))
        return -1;
    int m = snprintf (buf + n, size - (size_t) n, " mask=%s", s->mask_path);
    return m >= 0 && (size_t) m < size - (size_t) n ? n + m : -1;
}

// ---------------------------------------------------------------------------
// The [piv] keys of the configuration file

// A decimal integer, nothing before or after, from min to max (the file's
// integers: no sign but '-', no spaces) into *n. 0, or -1 with why.
static int
s_key_int (const char *value, long min, long max, long *n, char *why, size_t whylen)
{
    const char *digits = value[0] == '-' ? value + 1 : value;
    char *end = (char *) digits;
    errno = 0;
    *n = 0;
    if (isdigit ((unsigned char) *digits))
        *n = strtol (value, &end, 10);
    const char *what = NULL;
    if (end == digits || *end)
        what = "is not a number";
    else if (errno == ERANGE || *n < min || *n > max)
        what = "is out of range";
    if (what) {
        snprintf (why, whylen, "%s: expected an integer from %ld to %ld", what, min, max);
        return -1;
    }
    return 0;
}

// A list of window sizes as the file may write it, with spaces around each
// ("64, 32, 16"), checked by piv_settings_set_passes and written back
// without spaces into norm. 0 or -1.
static int
s_key_passes (const char *value, char *norm, size_t normlen)
{
    char *list = malloc (strlen (value) + 1);
    if (!list)
        return -1;
    size_t used = 0;
    const char *p = value;
    int ok = 1;
    while (ok) {
        while (*p == ' ')
            p++;
        size_t digits = strspn (p, "0123456789");
        ok = digits > 0;
        memcpy (list + used, p, digits);
        used += digits;
        for (p += digits; *p == ' ';)
            p++;
        if (*p != ',')
            break;
        list[used++] = *p++;
    }
    list[used] = '\0';
    piv_settings_t s;
    char err[256];
    piv_settings_init (&s);
    ok = ok && *p == '\0' && piv_settings_set_passes (&s, list, err, sizeof err) == 0
         && s_passes_text (&s, norm, normlen) >= 0;
    free (list);
    return ok ? 0 : -1;
}

// The rules of the preprocessing keys (cap, highpass, lcn, background;
// issue 25) as piv_settings_check_key's: 0 with norm, -1 with why, or 1
// for another name.
static int
s_check_preprocess_key (const char *name, const char *value, char *norm, size_t normlen,
                        char *why, size_t whylen)
{
    long n;
    if (strcmp (name, "lcn") == 0) {
        if (s_key_int (value, 0, PIV_LCN_MAX, &n, why, whylen) != 0)
            return -1;
        if (n == 1 || n == 2) {
            snprintf (why, whylen, "is out of range: expected 0 (off) or a tile from 3 to %d px",
                      PIV_LCN_MAX);
            return -1;
        }
        snprintf (norm, normlen, "%ld", n);
        return 0;
    }
    if (strcmp (name, "cap") == 0 || strcmp (name, "highpass") == 0) {
        double max = name[0] == 'c' ? PIV_CAP_MAX : PIV_HIGHPASS_MAX;
        char *end;
        double x = strtod (value, &end);
        if (end == value || *end || !(x >= 0) || x > max) {
            snprintf (why, whylen, "is not valid: expected a number from 0 (off) to %g%s", max,
                      name[0] == 'c' ? " standard deviations, such as 2" : " px, such as 8");
            return -1;
        }
        snprintf (norm, normlen, "%.15g", x);
        return 0;
    }
    if (strcmp (name, "background") == 0) {
        piv_background_kind_t kind;
        int frames;
        char err[256];
        if (piv_background_parse (value, &kind, &frames, err, sizeof err) != 0) {
            snprintf (why, whylen,
                      "is not one of its choices: expected none, min:N or mean:N (the last N "
                      "frames, 1 to %d)",
                      PIV_BACKGROUND_MAX);
            return -1;
        }
        piv_background_text (kind, frames, norm, normlen);
        return 0;
    }
    return 1;
}

int
piv_settings_check_key (const char *name, const char *value, char *norm, size_t normlen,
                        char *why, size_t whylen)
{
    long n;
    int rc = s_check_preprocess_key (name, value, norm, normlen, why, whylen);
    if (rc <= 0)
        return rc;
    if (strcmp (name, "passes") == 0) {
        if (s_key_passes (value, norm, normlen) == 0)
            return 0;
        snprintf (why, whylen,
                  "is not valid: expected one to eight window sizes from large to small, each "
                  "even from 8 to 256, such as 64,32,16 or 48,24");
        return -1;
    }
    if (strcmp (name, "overlap") == 0 || strcmp (name, "iterations") == 0) {
        int overlap = name[0] == 'o';
        if (s_key_int (value, overlap ? 0 : 1, overlap ? PIV_MAX_OVERLAP : PIV_MAX_ITERATIONS,
                       &n, why, whylen)
            != 0)
            return -1;
        snprintf (norm, normlen, "%ld", n);
        return 0;
    }
    if (strcmp (name, "deform") == 0) {
        piv_deform_t deform;
        char err[256];
        if (piv_deform_parse (value, &deform, err, sizeof err) != 0) {
            snprintf (why, whylen, "is not one of its choices: expected " S_DEFORM_WORDS);
            return -1;
        }
        snprintf (norm, normlen, "%s", piv_deform_name (deform));
        return 0;
    }
    if (strcmp (name, "mask") == 0) {
        const char *bad = strcmp (value, "none") == 0 ? NULL : s_mask_path_why (value, 0);
        if (bad) {
            snprintf (why, whylen,
                      "%s: expected the path of a mask image, without spaces or control "
                      "characters, or none",
                      bad);
            return -1;
        }
        snprintf (norm, normlen, "%s", strcmp (value, "none") == 0 ? "" : value);
        return 0;
    }
    if (strcmp (name, "smooth") == 0) {
        piv_smooth_t smooth;
        char err[256];
        if (piv_smooth_parse (value, &smooth, err, sizeof err) != 0) {
            snprintf (why, whylen, "is not one of its choices: expected final, predictor, both "
                                   "or off");
            return -1;
        }
        snprintf (norm, normlen, "%s", piv_smooth_name (smooth));
        return 0;
    }
    if (strcmp (name, "smooth_s") == 0) {
        char *end;
        double s = strtod (value, &end);
        if (end == value || *end || !(s >= 0) || s > 1e6) {
            snprintf (why, whylen, "is not a smoothing parameter: expected a number from 0 (chosen "
                                   "by generalized cross-validation) to 1e6, such as 0.1");
            return -1;
        }
        snprintf (norm, normlen, "%.15g", s);
        return 0;
    }
    // Every other key is the engine's to judge: piv_settings_parse knows
    // it or not, piv_settings_check says whether its value is in range, so
    // that a key the engine learns is a key of the file and of 'pivctl piv'
    // with no list to keep here.
    char text[512], err[512];
    piv_settings_t s;
    if (!*name || strchr (name, '=') || strchr (name, ' ') || strchr (value, ' ')
        || (size_t) snprintf (text, sizeof text, "%s=%s", name, value) >= sizeof text) {
        snprintf (why, whylen, "is not valid: expected one word");
        return -1;
    }
    if (piv_settings_parse (text, &s, err, sizeof err) != 0
        || piv_settings_check (&s, err, sizeof err) != 0) {
        if (strstr (err, "unknown key"))
            snprintf (why, whylen, "is not a setting of the PIV core");
        else
            snprintf (why, whylen, "is refused by the PIV core: %s", err);
        return -1;
    }
    snprintf (norm, normlen, "%s", value);
    return 0;
}
