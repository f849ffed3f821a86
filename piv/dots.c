// dots.c — finding and indexing a calibration target's dots (dots.h). The
// centre of a dot is the centroid of its area above a threshold 30 % of the
// way from the local ground to the dots, each edge pixel weighted by how
// far it is above the threshold: a sub-pixel edge, and no pull towards
// the brighter side of a dot under uneven light (which an intensity-
// weighted centroid has). On case E a low threshold does best: 0.3 of the
// contrast fits 0.11 and 0.15 px RMS where 0.5 fits 0.14 and 0.45 px (the
// speckled dots of camera 3 have ragged cores, not ragged rims).

#include "piv/dots.h"
#include "piv/camera_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TILE 128        // px: the threshold's tiles (two dots at least in 2 TILE)
#define BLUR 1          // px: radius of the box blur, run twice (more rounds the square)
#define MIN_AREA 30     // px: smaller blobs are noise
#define THR_FRAC 0.3f  // the threshold, as a fraction of the local contrast
#define SPAN 64         // lattice indices -SPAN .. SPAN

static int
s_cmp_float (const void *a, const void *b)
{
    float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}

// Box blur of radius r along rows then columns, in place (tmp: w * h).
static void
s_blur (float *a, float *tmp, int w, int h, int r)
{
    for (int y = 0; y < h; y++) {
        double s = 0;
        int n = 0;
        for (int x = -r; x < w + r; x++) {
            if (x + r < w) {
                s += a[y * w + x + r];
                n++;
            }
            if (x - r - 1 >= 0) {
                s -= a[y * w + x - r - 1];
                n--;
            }
            if (x >= 0 && x < w)
                tmp[y * w + x] = (float) (s / n);
        }
    }
    for (int x = 0; x < w; x++) {
        double s = 0;
        int n = 0;
        for (int y = -r; y < h + r; y++) {
            if (y + r < h) {
                s += tmp[(y + r) * w + x];
                n++;
            }
            if (y - r - 1 >= 0) {
                s -= tmp[(y - r - 1) * w + x];
                n--;
            }
            if (y >= 0 && y < h)
                a[y * w + x] = (float) (s / n);
        }
    }
}

// The threshold and the contrast of each tile: THR_FRAC of the way from
// the 5th to the 99th percentile of the 2 TILE square around its centre.
static int
s_tiles (const float *a, int w, int h, int tx, int ty, float *thr, float *con)
{
    float *v = malloc ((size_t) (4 * TILE * TILE / 4 + 16) * sizeof *v);
    if (!v)
        return -1;
    for (int ty_ = 0; ty_ < ty; ty_++)
        for (int tx_ = 0; tx_ < tx; tx_++) {
            int cx = tx_ * TILE + TILE / 2, cy = ty_ * TILE + TILE / 2;
            size_t n = 0;
            for (int y = cy - TILE; y < cy + TILE; y += 2)
                for (int x = cx - TILE; x < cx + TILE; x += 2)
                    if (x >= 0 && y >= 0 && x < w && y < h)
                        v[n++] = a[y * w + x];
            qsort (v, n, sizeof *v, s_cmp_float);
            float lo = v[n / 20], hi = v[n - 1 - n / 100];
            thr[ty_ * tx + tx_] = lo + THR_FRAC * (hi - lo);
            con[ty_ * tx + tx_] = hi - lo;
        }
    free (v);
    return 0;
}

// Bilinear between tile centres.
static float
s_interp (const float *t, int tx, int ty, int x, int y)
{
    double fx = (x + 0.5) / TILE - 0.5, fy = (y + 0.5) / TILE - 0.5;
    fx = fmin (fmax (fx, 0), tx - 1);
    fy = fmin (fmax (fy, 0), ty - 1);
    int x0 = (int) fx, y0 = (int) fy;
    int x1 = x0 + 1 < tx ? x0 + 1 : x0, y1 = y0 + 1 < ty ? y0 + 1 : y0;
    double ax = fx - x0, ay = fy - y0;
    return (float) ((1 - ay) * ((1 - ax) * t[y0 * tx + x0] + ax * t[y0 * tx + x1]) +
                    ay * ((1 - ax) * t[y1 * tx + x0] + ax * t[y1 * tx + x1]));
}

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int
piv_dots_find (const piv_image_t *img, piv_dot_t **dots_p, size_t *n_p, char *err, size_t errlen)
{
    int w = piv_image_width (img), h = piv_image_height (img);
    size_t np = (size_t) w * (size_t) h;
    int tx = (w + TILE - 1) / TILE, ty = (h + TILE - 1) / TILE;
    float *a = malloc (np * sizeof *a), *tmp = malloc (np * sizeof *tmp);
    float *thr = malloc ((size_t) (tx * ty) * sizeof *thr), *con = malloc ((size_t) (tx * ty) * sizeof *con);
    int *lab = calloc (np, sizeof *lab), *stack = malloc (np * sizeof *stack);
    piv_dot_t *dots = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    if (!a || !tmp || !thr || !con || !lab || !stack)
        goto nomem;
    memcpy (a, piv_image_cdata (img), np * sizeof *a);
    s_blur (a, tmp, w, h, BLUR);
    s_blur (a, tmp, w, h, BLUR);
    if (s_tiles (a, w, h, tx, ty, thr, con))
        goto nomem;
    // tmp becomes the threshold map, then each pixel's edge weight.
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            tmp[y * w + x] = s_interp (thr, tx, ty, x, y);
    int label = 0;
    for (size_t p0 = 0; p0 < np; p0++) {
        if (lab[p0] || a[p0] <= tmp[p0])
            continue;
        // Flood fill one blob (4-connected).
        label++;
        size_t sp = 0;
        stack[sp++] = (int) p0;
        lab[p0] = label;
        double sw = 0, sx = 0, sy = 0;
        int area = 0, x0 = w, x1 = -1, y0 = h, y1 = -1;
        while (sp) {
            int p = stack[--sp], x = p % w, y = p / w;
            area++;
            x0 = x < x0 ? x : x0;
            x1 = x > x1 ? x : x1;
            y0 = y < y0 ? y : y0;
            y1 = y > y1 ? y : y1;
            // The edge's sub-pixel place: a pixel just above the threshold
            // is partly outside the dot. Ramp over a tenth of the contrast.
            double ramp = 0.1 * s_interp (con, tx, ty, x, y);
            double wgt = ramp > 0 ? fmin (1, 0.5 + (a[p] - tmp[p]) / ramp) : 1;
            sw += wgt;
            sx += wgt * x;
            sy += wgt * y;
            int nb[4] = {x > 0 ? p - 1 : -1, x + 1 < w ? p + 1 : -1, y > 0 ? p - w : -1,
                         y + 1 < h ? p + w : -1};
            for (int k = 0; k < 4; k++)
                if (nb[k] >= 0 && !lab[nb[k]] && a[nb[k]] > tmp[nb[k]]) {
                    lab[nb[k]] = label;
                    stack[sp++] = nb[k];
                }
        }
        if (area < MIN_AREA || x0 == 0 || y0 == 0 || x1 == w - 1 || y1 == h - 1)
            continue;
        if (n == cap) {
            size_t c = cap ? 2 * cap : 256;
            piv_dot_t *d = realloc (dots, c * sizeof *d);
            if (!d)
                goto nomem;
            dots = d;
            cap = c;
        }
        piv_dot_t *d = &dots[n++];
        d->col = sx / sw;
        d->row = sy / sw;
        d->area = area;
        d->fill = area / ((double) (x1 - x0 + 1) * (y1 - y0 + 1));
        d->kind = PIV_DOT;
        d->i = d->j = PIV_DOT_UNINDEXED;
    }
    // The target's marks are all about one size: drop what is not.
    if (n >= 4) {
        double *areas = malloc (n * sizeof *areas);
        if (!areas)
            goto nomem;
        for (size_t k = 0; k < n; k++)
            areas[k] = dots[k].area;
        qsort (areas, n, sizeof *areas, s_cmp_double);
        double med = areas[n / 2];
        free (areas);
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (dots[k].area > 0.3 * med && dots[k].area < 3 * med)
                dots[m++] = dots[k];
        n = m;
    }
    if (n < 4) {
        cam_seterr (err, errlen, "no target found: %zu blob%s of one size", n, n == 1 ? "" : "s");
        goto done;
    }
    *dots_p = dots;
    *n_p = n;
    dots = NULL;
    rc = 0;
    goto done;
nomem:
    cam_seterr (err, errlen, "out of memory");
done:
    free (a);
    free (tmp);
    free (thr);
    free (con);
    free (lab);
    free (stack);
    free (dots);
    return rc;
}

// The local lattice at site (i, j): origin and unit vectors fitted by least
// squares to the indexed dots within 4 sites (at least 4 of them, not on
// one line); -1 if there are too few.
static int
s_local (const piv_dot_t *dots, const int *site, int i, int j, double o[2], double e1[2],
         double e2[2])
{
    double m[3][3] = {{0}}, bc[3] = {0}, br[3] = {0};
    int k = 0;
    for (int a = i - 4; a <= i + 4; a++)
        for (int b = j - 4; b <= j + 4; b++) {
            if (a < -SPAN || a > SPAN || b < -SPAN || b > SPAN)
                continue;
            int d = site[(a + SPAN) * (2 * SPAN + 1) + b + SPAN];
            if (d < 0)
                continue;
            double v[3] = {1, a - i, b - j};
            for (int r = 0; r < 3; r++) {
                for (int c = 0; c < 3; c++)
                    m[r][c] += v[r] * v[c];
                bc[r] += v[r] * dots[d].col;
                br[r] += v[r] * dots[d].row;
            }
            k++;
        }
    double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                 m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                 m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    if (k < 4 || fabs (det) < 1e-9)
        return -1;
    // Cramer's rule on the 3x3 normal equations, for col and for row.
    for (int q = 0; q < 2; q++) {
        const double *b = q ? br : bc;
        double x[3];
        for (int c = 0; c < 3; c++) {
            double t[3][3];
            memcpy (t, m, sizeof t);
            for (int r = 0; r < 3; r++)
                t[r][c] = b[r];
            x[c] = (t[0][0] * (t[1][1] * t[2][2] - t[1][2] * t[2][1]) -
                    t[0][1] * (t[1][0] * t[2][2] - t[1][2] * t[2][0]) +
                    t[0][2] * (t[1][0] * t[2][1] - t[1][1] * t[2][0])) /
                   det;
        }
        o[q] = x[0];
        e1[q] = x[1];
        e2[q] = x[2];
    }
    return 0;
}

// The unindexed dot nearest (c, r) within tol, or -1.
static int
s_nearest (const piv_dot_t *dots, size_t n, double c, double r, double tol)
{
    int best = -1;
    double bd = tol * tol;
    for (size_t k = 0; k < n; k++) {
        if (dots[k].kind != PIV_DOT || dots[k].i != PIV_DOT_UNINDEXED)
            continue;
        double d = (dots[k].col - c) * (dots[k].col - c) + (dots[k].row - r) * (dots[k].row - r);
        if (d < bd) {
            bd = d;
            best = (int) k;
        }
    }
    return best;
}

int
piv_dots_index (piv_dot_t *dots, size_t n, char *err, size_t errlen)
{
    int sq = -1, tr = -1;
    for (size_t k = 0; k < n; k++) {
        dots[k].kind = PIV_DOT;
        dots[k].i = dots[k].j = PIV_DOT_UNINDEXED;
        if (sq < 0 || dots[k].fill > dots[sq].fill)
            sq = (int) k;
        if (tr < 0 || dots[k].fill < dots[tr].fill)
            tr = (int) k;
    }
    if (sq < 0 || dots[sq].fill < 0.9 || dots[tr].fill > 0.65) {
        cam_seterr (err, errlen, "no square and triangle among %zu blobs (the squarest fills "
                    "%.2f of its bounding box, a square 0.9 or more; the least filled %.2f, a "
                    "triangle 0.65 or less): not the target of doc/stereo.md", n,
                    sq < 0 ? 0 : dots[sq].fill, tr < 0 ? 0 : dots[tr].fill);
        return -1;
    }
    dots[sq].kind = PIV_DOT_SQUARE;
    dots[tr].kind = PIV_DOT_TRIANGLE;
    double sc = dots[sq].col, sr = dots[sq].row, tc = dots[tr].col, trr = dots[tr].row;
    double unit = hypot (tc - sc, trr - sr) / M_SQRT2;
    // The origin and the site (1, 1) are the two dots nearest the marks'
    // midpoint; the origin is the one from which the triangle (+X) and the
    // square (+Y) turn as X right and Y up do in an image whose rows go down.
    double mc = 0.5 * (sc + tc), mr = 0.5 * (sr + trr);
    int origin = -1;
    for (int pass = 0; pass < 2 && origin < 0; pass++) {
        int k = s_nearest (dots, n, mc, mr, unit);
        if (k < 0)
            break;
        double e1c = tc - dots[k].col, e1r = trr - dots[k].row;
        double e2c = sc - dots[k].col, e2r = sr - dots[k].row;
        if (e1c * e2r - e1r * e2c < 0)
            origin = k;
        else
            dots[k].i = 0;  // set aside for the second pass
    }
    for (size_t k = 0; k < n; k++)
        if (dots[k].i == 0)
            dots[k].i = PIV_DOT_UNINDEXED;
    if (origin < 0) {
        cam_seterr (err, errlen, "no origin dot beside the square and the triangle");
        return -1;
    }
    int side = 2 * SPAN + 1;
    int *site = malloc ((size_t) (side * side) * sizeof *site);
    int *queue = malloc ((n + 1) * sizeof *queue);
    if (!site || !queue) {
        free (site);
        free (queue);
        cam_seterr (err, errlen, "out of memory");
        return -1;
    }
    for (int k = 0; k < side * side; k++)
        site[k] = -1;
    double g1[2] = {tc - dots[origin].col, trr - dots[origin].row};
    double g2[2] = {sc - dots[origin].col, sr - dots[origin].row};
    dots[origin].i = dots[origin].j = 0;
    site[SPAN * side + SPAN] = origin;
    size_t head = 0, tail = 0;
    int count = 1;
    queue[tail++] = origin;
    static const int steps[8][2] = {{1, 1}, {1, -1}, {-1, 1}, {-1, -1},
                                    {2, 0}, {-2, 0}, {0, 2},  {0, -2}};
    while (head < tail) {
        const piv_dot_t *p = &dots[queue[head++]];
        double o[2] = {p->col, p->row}, e1[2] = {g1[0], g1[1]}, e2[2] = {g2[0], g2[1]};
        s_local (dots, site, p->i, p->j, o, e1, e2);  // else the marks' own vectors
        for (int s = 0; s < 8; s++) {
            int a = p->i + steps[s][0], b = p->j + steps[s][1];
            if (a < -SPAN || a > SPAN || b < -SPAN || b > SPAN ||
                site[(a + SPAN) * side + b + SPAN] >= 0)
                continue;
            double c = o[0] + steps[s][0] * e1[0] + steps[s][1] * e2[0];
            double r = o[1] + steps[s][0] * e1[1] + steps[s][1] * e2[1];
            double tol = 0.4 * fmin (hypot (e1[0], e1[1]), hypot (e2[0], e2[1]));
            int k = s_nearest (dots, n, c, r, tol);
            if (k < 0)
                continue;
            dots[k].i = a;
            dots[k].j = b;
            site[(a + SPAN) * side + b + SPAN] = k;
            queue[tail++] = k;
            count++;
        }
    }
    free (site);
    free (queue);
    return count;
}
