// test_process.c — the agent's processor (agents/process.c) on real TIFF
// files, as the agent runs it for each TASK: what the settings text makes
// it do before and after the engine (issue 25: the background of an
// experiment from its own frames, recorded in the result header).

#include "agents/process.h"
#include "common/config.h"
#include "common/proto.h"
#include "piv/field.h"
#include "piv/flow.h"
#include "piv/image.h"
#include "piv/piv.h"
#include "piv/stereo.h"
#include "tests/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A piv processor writing results beneath dir/results.
static process_t *
s_processor (const char *dir)
{
    char conf[4096], err[1024] = "";
    snprintf (conf, sizeof conf, "%s", tu_path (dir, "pivfarm.conf"));
    const char *text = "agent\n    processor = piv\n    results = ./results\n";
    tu_spit (conf, text, strlen (text));
    config_t cfg;
    ck_assert_msg (config_load (&cfg, conf, err, sizeof err) == 0, "%s", err);
    process_t *p = process_new (&cfg, err, sizeof err);
    ck_assert_msg (p != NULL, "%s", err);
    return p;
}

// Runs pair 'pair' of 'experiment' (frames a, b of tests/data) with
// 'settings'; its field, and its result file's text into *text_p (freed
// by the caller).
static piv_field_t *
s_task (process_t *p, const char *dir, const char *experiment, int pair, const char *fa,
        const char *fb, const char *settings, char **text_p)
{
    char a[4096], b[4096], out[64], err[1024] = "";
    snprintf (a, sizeof a, "%s", tu_data (fa));
    snprintf (b, sizeof b, "%s", tu_data (fb));
    snprintf (out, sizeof out, "%s/%04d.txt", experiment, pair);
    proto_msg_t task = {.command = PROTO_TASK,
                        .pair = (uint64_t) pair,
                        .attempt = 1,
                        .experiment = (char *) experiment,
                        .path_a = a,
                        .path_b = b,
                        .settings = (char *) settings,
                        .output = out},
                result;
    ck_assert_msg (process_task (p, &task, &result, err, sizeof err) == 0, "%s", err);
    piv_field_t *field = piv_field_decode (result.blob, result.blob_size, err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    proto_msg_release (&result);
    char path[4200];
    snprintf (path, sizeof path, "%s/results/%s", dir, out);
    *text_p = tu_slurp (path, NULL);
    ck_assert_msg (*text_p != NULL, "no result file '%s'", path);
    return field;
}

// The field pivfarm-piv -b A,B gives (the minimum of the pair's two frames
// subtracted from both), made here with the library's own functions.
static piv_field_t *
s_reference (const char *fa, const char *fb, const char *settings)
{
    char err[1024] = "";
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_msg (piv_image_load_pair (tu_data (fa), tu_data (fb), 0, &a, &b, err, sizeof err)
                       == 0,
                   "%s", err);
    const piv_image_t *both[2] = {a, b};
    piv_image_t *bg = piv_image_min (both, 2, err, sizeof err);
    ck_assert_msg (bg && piv_image_subtract (a, bg, err, sizeof err) == 0
                       && piv_image_subtract (b, bg, err, sizeof err) == 0,
                   "%s", err);
    piv_settings_t s;
    ck_assert_msg (piv_settings_parse (settings, &s, err, sizeof err) == 0, "%s", err);
    s.background = PIV_BACKGROUND_NONE;
    piv_t *engine = piv_new (&s, err, sizeof err);
    ck_assert_msg (engine != NULL, "%s", err);
    piv_field_t *field = piv_process (engine, a, b, err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    piv_destroy (&engine);
    piv_image_destroy (&bg);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    return field;
}

static int
s_same (const piv_field_t *f, const piv_field_t *g)
{
    long n = (long) f->nx * f->ny;
    return f->nx == g->nx && f->ny == g->ny && memcmp (f->u, g->u, n * sizeof *f->u) == 0
           && memcmp (f->v, g->v, n * sizeof *f->v) == 0
           && memcmp (f->flags, g->flags, n * sizeof *f->flags) == 0;
}

// background=min:4 on a real pair: the first pair's background is the
// minimum of its own two frames (pivfarm-piv -b A,B's field, to the bit),
// the header says over how many frames; the set fills up to 4 frames and
// slides; another experiment has its own set; without the key the frames
// are as read.
START_TEST (an_experiments_background_is_taken_from_its_last_frames_and_recorded)
{
    char dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_tmpdir ());
    process_t *p = s_processor (dir);
    const char *settings = "passes=32,16 overlap=50 iterations=1 background=min:4";
    char *text;
    piv_field_t *ref = s_reference ("B005_1.tif", "B005_2.tif", settings);
    piv_field_t *f = s_task (p, dir, "run", 1, "B005_1.tif", "B005_2.tif", settings, &text);
    ck_assert_msg (s_same (f, ref), "the agent's field differs from pivfarm-piv -b's");
    ck_assert_msg (strstr (text, "# settings passes=32,16 overlap=50 iterations=1 "
                                 "background=min:4\n# background min:4 of experiment 'run' "
                                 "over 2 frames\n"),
                   "%s", text);
    free (text);
    piv_field_destroy (&f);
    // The same frames again: the minimum of four frames, two of each, is
    // the same background, so the same field; the header counts 4.
    for (int pair = 2; pair <= 3; pair++) {
        f = s_task (p, dir, "run", pair, "B005_1.tif", "B005_2.tif", settings, &text);
        ck_assert (s_same (f, ref));
        ck_assert_msg (strstr (text, "# background min:4 of experiment 'run' over 4 frames\n"),
                       "%s", text);
        free (text);
        piv_field_destroy (&f);
    }
    // Another experiment starts its own set.
    f = s_task (p, dir, "other", 1, "B005_1.tif", "B005_2.tif", settings, &text);
    ck_assert_msg (strstr (text, "of experiment 'other' over 2 frames\n"), "%s", text);
    free (text);
    piv_field_destroy (&f);
    // Without the key, no background and no line about it: another field.
    f = s_task (p, dir, "run", 4, "B005_1.tif", "B005_2.tif", "passes=32,16 overlap=50 "
                "iterations=1", &text);
    ck_assert (!strstr (text, "# background"));
    ck_assert (!s_same (f, ref));
    free (text);
    piv_field_destroy (&f);
    piv_field_destroy (&ref);
    process_destroy (&p);
    tu_rmtree (dir);
}
END_TEST

// A sliding set too large for an agent thread is refused naming the
// experiment and the sizes, not allocated.
START_TEST (a_background_beyond_an_agent_threads_memory_is_refused_naming_the_experiment)
{
    char dir[4096], a[4096], err[1024] = "";
    snprintf (dir, sizeof dir, "%s", tu_tmpdir ());
    process_t *p = s_processor (dir);
    // 32 frames of 4096 x 4096 floats: 2 GiB.
    snprintf (a, sizeof a, "%s", tu_path (dir, "big.tif"));
    tu_tiff_zeros (a, 4096, 4096, 8, 1, 64);
    proto_msg_t task = {.command = PROTO_TASK, .pair = 1, .attempt = 1, .experiment = "huge",
                        .path_a = a, .path_b = a,
                        .settings = "passes=32 background=mean:32", .output = "huge/0001.txt"},
                result;
    ck_assert_int_eq (process_task (p, &task, &result, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "background of experiment 'huge': 32 frames of 4096x4096 take "
                                "2048 MiB"),
                   "%s", err);
    process_destroy (&p);
    tu_rmtree (dir);
}
END_TEST

// Writes 'count' synthetic pairs of a uniform shift (seeds 1 ..) with a
// fixed pattern over every frame (a static particle image as bright as the
// moving ones: dust on the window, a reflection), as dir/sN_a.tif and
// dir/sN_b.tif, 8-bit; the flow into *flow.
static void
s_dusty_run (const char *dir, int count, piv_flow_t *flow)
{
    char err[1024] = "";
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = 256;
    piv_image_t *dust_a, *dust_b;
    synth.seed = 99;
    ck_assert (piv_flow_parse (flow, "uniform:0,0", 256, 256, err, sizeof err) == 0);
    ck_assert_msg (piv_synth_pair (&synth, flow, &dust_a, &dust_b, err, sizeof err) == 0, "%s",
                   err);
    ck_assert (piv_flow_parse (flow, "uniform:3.3,-1.7", 256, 256, err, sizeof err) == 0);
    const float *dust = piv_image_cdata (dust_a);
    for (int i = 1; i <= count; i++) {
        piv_image_t *frames[2];
        synth.seed = (uint64_t) i;
        ck_assert_msg (piv_synth_pair (&synth, flow, &frames[0], &frames[1], err, sizeof err) == 0,
                       "%s", err);
        for (int f = 0; f < 2; f++) {
            float *p = piv_image_data (frames[f]);
            for (int k = 0; k < 256 * 256; k++)
                p[k] = p[k] + dust[k] > 255 ? 255 : p[k] + dust[k];
            char path[4200];
            snprintf (path, sizeof path, "%s/s%d_%c.tif", dir, i, f ? 'b' : 'a');
            const piv_image_t *one[1] = {frames[f]};
            ck_assert_msg (piv_image_save (path, one, 1, 8, err, sizeof err) == 0, "%s", err);
            piv_image_destroy (&frames[f]);
        }
    }
    piv_image_destroy (&dust_a);
    piv_image_destroy (&dust_b);
}

// RMS error (px) of a field against the flow, vectors 16 px inside.
static double
s_error (const piv_field_t *field, const piv_flow_t *flow)
{
    piv_score_t score;
    ck_assert_int_eq (piv_score (field, flow, PIV_FLAG_REPLACED, 16, 256, 256, &score), 0);
    ck_assert_int_gt (score.count, 0);
    return score.rms;
}

// What the background is for: a run of 8 pairs whose frames all carry the
// same bright dust. Without a background the dust's correlation at zero
// displacement wins in most windows; with background=min:16 (the run's 16
// frames) the minimum is the dust, subtracted, and the last pair's shift
// is measured as on clean frames.
START_TEST (a_background_of_the_runs_frames_takes_away_fixed_dust)
{
    char dir[4096], path[4200];
    snprintf (dir, sizeof dir, "%s", tu_tmpdir ());
    piv_flow_t flow;
    s_dusty_run (dir, 8, &flow);
    process_t *p = s_processor (dir);
    char a[4200], b[4200], err[1024] = "", out[64], *text = NULL;
    double plain = 0, with = 0;
    for (int i = 1; i <= 8; i++)
        for (int bg = 0; bg < 2; bg++) {
            snprintf (a, sizeof a, "%s/s%d_a.tif", dir, i);
            snprintf (b, sizeof b, "%s/s%d_b.tif", dir, i);
            snprintf (out, sizeof out, "%s/%04d.txt", bg ? "bg" : "plain", i);
            proto_msg_t task = {.command = PROTO_TASK, .pair = (uint64_t) i, .attempt = 1,
                                .experiment = bg ? "bg" : "plain", .path_a = a, .path_b = b,
                                .settings = bg ? "passes=32 background=min:16" : "passes=32",
                                .output = out},
                        result;
            ck_assert_msg (process_task (p, &task, &result, err, sizeof err) == 0, "%s", err);
            piv_field_t *field = piv_field_decode (result.blob, result.blob_size, err, sizeof err);
            ck_assert_msg (field != NULL, "%s", err);
            if (i == 8)
                *(bg ? &with : &plain) = s_error (field, &flow);
            piv_field_destroy (&field);
            proto_msg_release (&result);
        }
    fprintf (stderr, "fixed dust, 8th pair: RMS error %.3f px plain, %.3f px with background "
                     "min:16\n",
             plain, with);
    ck_assert_msg (plain > 1.0, "the dust did not disturb the plain field: %.3f px", plain);
    ck_assert_msg (with < 0.1, "with the background: %.3f px", with);
    snprintf (path, sizeof path, "%s/results/bg/0008.txt", dir);
    text = tu_slurp (path, NULL);
    ck_assert_msg (text && strstr (text, "# background min:16 of experiment 'bg' over 16 frames\n"),
                   "%s", text ? text : "(no file)");
    free (text);
    process_destroy (&p);
    tu_rmtree (dir);
}
END_TEST


// A stereo set's TASK (issue 26): four frames and the rig's text. The
// agent's field is the library's reconstruction on the rig's grid, to the
// bit, with w; a set without a rig, or with a frame of another size,
// fails naming why.
START_TEST (a_stereo_task_is_its_four_frames_reconstruction_and_fails_naming_why)
{
    char dir[4096], prefix[4200], out[8192], err[1024] = "";
    snprintf (dir, sizeof dir, "%s", tu_tmpdir ());
    snprintf (prefix, sizeof prefix, "%s/s", dir);
    const char *synth[] = {"--stereo", "--size", "256x256", "-f", "uniform:0.3,-0.2,0.2",
                           "-o",       prefix,   NULL};
    ck_assert_msg (tu_run_bin ("pivfarm-synth", synth, out, sizeof out, 120) == 0, "%s", out);
    char cal[4300];
    snprintf (cal, sizeof cal, "%s.cal", prefix);
    piv_cameras_t *rig = piv_cameras_load (cal, err, sizeof err);
    ck_assert_msg (rig != NULL, "%s", err);
    piv_stereo_grid_t grid;
    ck_assert_msg (piv_stereo_default_grid (piv_cameras_get (rig, 0), piv_cameras_get (rig, 1),
                                            256, 256, &grid, err, sizeof err)
                       == 0,
                   "%s", err);
    ck_assert_int_eq (piv_cameras_set_grid (rig, &grid), 0);
    char *text = piv_cameras_format (rig);
    ck_assert_ptr_nonnull (text);
    char paths[4][4200];
    for (int k = 0; k < 4; k++)
        snprintf (paths[k], sizeof paths[k], "%s/cam%d/s_%c.tif", dir, 1 + k / 2,
                  k % 2 ? 'b' : 'a');
    const char *settings = "passes=32,16 overlap=50 iterations=1";
    process_t *p = s_processor (dir);
    proto_msg_t task = {.command = PROTO_TASK, .pair = 7, .attempt = 1, .experiment = "E",
                        .path_a = paths[0], .path_b = paths[1], .path_c = paths[2],
                        .path_d = paths[3], .cameras = text, .settings = (char *) settings,
                        .output = "E/s.txt"},
                result;
    ck_assert_msg (process_task (p, &task, &result, err, sizeof err) == 0, "%s", err);
    piv_field_t *field = piv_field_decode (result.blob, result.blob_size, err, sizeof err);
    ck_assert_msg (field && field->w && field->residual, "%s", err);
    proto_msg_release (&result);
    // The library's, as pivfarm-piv --cameras makes it.
    piv_image_t *fr[4] = {NULL};
    for (int c = 0; c < 2; c++)
        ck_assert_msg (piv_image_load_pair (paths[2 * c], paths[2 * c + 1], 0, &fr[2 * c],
                                            &fr[2 * c + 1], err, sizeof err)
                           == 0,
                       "%s", err);
    piv_settings_t s;
    ck_assert (piv_settings_parse (settings, &s, err, sizeof err) == 0);
    piv_stereo_t *st = piv_stereo_new (rig, &s, 256, 256, NULL, err, sizeof err);
    ck_assert_msg (st != NULL, "%s", err);
    piv_field3_t *f3 = piv_stereo_process (st, fr[0], fr[1], fr[2], fr[3], err, sizeof err);
    ck_assert_msg (f3 != NULL, "%s", err);
    piv_field_t *ref = piv_stereo_field (f3, piv_stereo_grid (st), piv_stereo_planar (st, 0));
    ck_assert (ref != NULL);
    long n = (long) ref->nx * ref->ny;
    ck_assert (s_same (field, ref) && memcmp (field->w, ref->w, n * sizeof *ref->w) == 0);
    // Its result file: the 3-C field in mm, camera 2's frames named.
    char path[4200];
    snprintf (path, sizeof path, "%s/results/E/s.txt", dir);
    char *file = tu_slurp (path, NULL);
    ck_assert_msg (file && strstr (file, "frame_c ") && strstr (file, "frame_d ")
                       && strstr (file, " w "),
                   "%s", file ? file : "(no file)");
    free (file);
    // No rig: fails saying how to attach one.
    task.cameras = NULL;
    ck_assert_int_eq (process_task (p, &task, &result, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "pivctl calibrate E --cameras FILE"), "%s", err);
    // Camera 2's frames of another size: fails naming both frames.
    char other[4200];
    snprintf (other, sizeof other, "%s", tu_data ("B005_1.tif"));
    task.cameras = text;
    task.path_c = other, task.path_d = other;
    ck_assert_int_eq (process_task (p, &task, &result, err, sizeof err), -1);
    ck_assert_msg (strstr (err, paths[0]) && strstr (err, "B005_1.tif") && strstr (err, "one size"),
                   "%s", err);
    for (int k = 0; k < 4; k++)
        piv_image_destroy (&fr[k]);
    piv_field3_destroy (&f3);
    piv_stereo_destroy (&st);
    piv_field_destroy (&ref);
    piv_field_destroy (&field);
    piv_cameras_destroy (&rig);
    free (text);
    process_destroy (&p);
    tu_rmtree (dir);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("process");
    TCase *tc = tcase_create ("background");
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, an_experiments_background_is_taken_from_its_last_frames_and_recorded);
    tcase_add_test (tc,
                    a_background_beyond_an_agent_threads_memory_is_refused_naming_the_experiment);
    tcase_add_test (tc, a_background_of_the_runs_frames_takes_away_fixed_dust);
    tcase_add_test (tc, a_stereo_task_is_its_four_frames_reconstruction_and_fails_naming_why);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
