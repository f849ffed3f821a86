// points.c — reading calibration points (points.h): the plain form line by
// line, the XML through libxml2's tree (no hand-written XML parser).

#include "piv/points.h"
#include "piv/camera_internal.h"

#include <ctype.h>
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
piv_points_init (piv_points_t *pts)
{
    pts->p = NULL;
    pts->n = pts->cap = 0;
}

void
piv_points_release (piv_points_t *pts)
{
    free (pts->p);
    piv_points_init (pts);
}

int
piv_points_add (piv_points_t *pts, const piv_point_t *pt)
{
    if (pts->n == pts->cap) {
        size_t cap = pts->cap ? 2 * pts->cap : 64;
        piv_point_t *p = realloc (pts->p, cap * sizeof *p);
        if (!p)
            return -1;
        pts->p = p;
        pts->cap = cap;
    }
    pts->p[pts->n++] = *pt;
    return 0;
}

// Five finite numbers and nothing else in text: 0, or -1.
static int
s_parse5 (const char *text, double v[5])
{
    const char *s = text;
    for (int i = 0; i < 5; i++) {
        char *end;
        errno = 0;
        v[i] = strtod (s, &end);
        if (end == s || errno == ERANGE || !isfinite (v[i]))
            return -1;
        s = end;
    }
    while (isspace ((unsigned char) *s))
        s++;
    return *s ? -1 : 0;
}

// The text trimmed and shortened for a message.
static const char *
s_quote (const char *text, char *buf, size_t size)
{
    while (isspace ((unsigned char) *text))
        text++;
    size_t n = strlen (text);
    while (n && isspace ((unsigned char) text[n - 1]))
        n--;
    if (n > 60) {
        snprintf (buf, size, "%.57s...", text);
        return buf;
    }
    snprintf (buf, size, "%.*s", (int) n, text);
    for (char *c = buf; *c; c++)
        if (isspace ((unsigned char) *c))
            *c = ' ';
    return buf;
}

static int
s_bad_point (const char *path, long line, const char *text, char *err, size_t errlen)
{
    char q[80];
    cam_seterr (err, errlen, "bad point in '%s' line %ld: expected 'X Y Z col row' (five numbers), "
              "got '%s'", path, line, s_quote (text, q, sizeof q));
    return -1;
}

static int
s_read_plain (piv_points_t *pts, FILE *f, const char *path, char *err, size_t errlen)
{
    char ebuf[128];
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    while (rc == 0 && getline (&line, &cap, f) >= 0) {
        lineno++;
        char *hash = strchr (line, '#');
        if (hash)
            *hash = '\0';
        const char *s = line;
        while (isspace ((unsigned char) *s))
            s++;
        if (!*s)
            continue;
        double v[5];
        if (s_parse5 (s, v))
            rc = s_bad_point (path, lineno, s, err, errlen);
        else {
            piv_point_t pt = {v[0], v[1], v[2], v[3], v[4], (int) lineno};
            if (piv_points_add (pts, &pt)) {
                cam_seterr (err, errlen, "cannot read '%s': out of memory", path);
                rc = -1;
            }
        }
    }
    if (rc == 0 && ferror (f)) {
        cam_seterr (err, errlen, "cannot read '%s': %s", path,
                   cam_strerror (errno, ebuf, sizeof ebuf));
        rc = -1;
    }
    free (line);
    return rc;
}

// Walks the tree: the unit (first <CoordUnit>) and every <PointCoord>.
typedef struct {
    piv_points_t *pts;      // where the points go (world still in the file's unit)
    const char *path;       // the file, for messages
    double unit;            // mm per the file's unit; 0 until <CoordUnit>
    long unit_line;         // its line, for messages
    char *err;              // the message on failure
    size_t errlen;
} s_xml_t;

static int
s_walk (s_xml_t *x, xmlNode *node)
{
    for (; node; node = node->next) {
        if (node->type != XML_ELEMENT_NODE)
            continue;
        const char *name = (const char *) node->name;
        if (strcmp (name, "CoordUnit") == 0 && x->unit == 0) {
            xmlChar *text = xmlNodeGetContent (node);
            char q[80];
            s_quote (text ? (const char *) text : "", q, sizeof q);
            xmlFree (text);
            x->unit = strcmp (q, "mm") == 0 ? 1 : strcmp (q, "cm") == 0 ? 10
                      : strcmp (q, "m") == 0    ? 1000
                                                : -1;
            x->unit_line = xmlGetLineNo (node);
            if (x->unit < 0) {
                cam_seterr (x->err, x->errlen, "bad <CoordUnit> in '%s' line %ld: '%s' (expected mm, "
                          "cm or m)", x->path, x->unit_line, q);
                return -1;
            }
        }
        else if (strcmp (name, "PointCoord") == 0) {
            xmlChar *text = xmlNodeGetContent (node);
            const char *t = text ? (const char *) text : "";
            double v[5];
            long line = xmlGetLineNo (node);
            int bad = s_parse5 (t, v);
            if (bad)
                s_bad_point (x->path, line, t, x->err, x->errlen);
            xmlFree (text);
            if (bad)
                return -1;
            // UVMAT (Matlab) counts pixels from 1: the first pixel's centre
            // is (1, 1), the engine's (0, 0). Case E's dots, found in its
            // target images, sit at (-1.02, -0.96) px (camera 1) and (-0.89,
            // -0.83) (camera 3) from the given points: 1-based, shifted here.
            piv_point_t pt = {v[0], v[1], v[2], v[3] - 1, v[4] - 1, (int) line};
            if (piv_points_add (x->pts, &pt)) {
                cam_seterr (x->err, x->errlen, "cannot read '%s': out of memory", x->path);
                return -1;
            }
        }
        if (s_walk (x, node->children))
            return -1;
    }
    return 0;
}

static int
s_read_xml (piv_points_t *pts, const char *path, char *err, size_t errlen)
{
    // No network, no messages on stderr: the error comes back in err.
    xmlDoc *doc = xmlReadFile (path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                XML_PARSE_NOWARNING);
    if (!doc) {
        const xmlError *e = xmlGetLastError ();
        char q[120];
        cam_seterr (err, errlen, "cannot read '%s' line %d: %s", path, e ? e->line : 0,
                  s_quote (e && e->message ? e->message : "not XML", q, sizeof q));
        return -1;
    }
    size_t first = pts->n;
    s_xml_t x = {pts, path, 0, 0, err, errlen};
    int rc = s_walk (&x, xmlDocGetRootElement (doc));
    xmlFreeDoc (doc);
    if (rc == 0 && x.unit == 0 && pts->n > first) {
        cam_seterr (err, errlen, "no <CoordUnit> in '%s': the unit of its world coordinates (mm, cm "
                  "or m) is needed", path);
        rc = -1;
    }
    for (size_t i = first; rc == 0 && i < pts->n; i++) {
        pts->p[i].x *= x.unit;
        pts->p[i].y *= x.unit;
        pts->p[i].z *= x.unit;
    }
    return rc;
}

int
piv_points_read (piv_points_t *pts, const char *path, char *err, size_t errlen)
{
    char ebuf[128];
    FILE *f = fopen (path, "r");
    if (!f) {
        cam_seterr (err, errlen, "cannot open '%s': %s", path,
                   cam_strerror (errno, ebuf, sizeof ebuf));
        return -1;
    }
    int c;
    while ((c = getc (f)) != EOF && isspace (c))
        ;
    size_t first = pts->n;
    int rc;
    if (c == '<') {
        fclose (f);
        rc = s_read_xml (pts, path, err, errlen);
    }
    else {
        rewind (f);  // line numbers count from the first line
        rc = s_read_plain (pts, f, path, err, errlen);
        fclose (f);
    }
    if (rc == 0 && pts->n == first) {
        cam_seterr (err, errlen, "no points in '%s': expected lines 'X Y Z col row' (world mm, "
                  "image px) or <PointCoord> elements", path);
        rc = -1;
    }
    if (rc)
        pts->n = first;
    return rc;
}
