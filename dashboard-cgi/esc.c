// esc.c — escaping every string that reaches the page: HTML text and
// attributes, JSON strings, Prometheus label values. Bytes that are not
// valid UTF-8 become U+FFFD so that neither a browser nor a JSON reader
// sees a broken sequence.

#include "dashboard-cgi/dash.h"

#include <math.h>
#include <stddef.h>

int
dash_utf8_length (const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    int n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
            : s[0] >= 0xF0 && s[0] <= 0xF4                                   ? 4
                                                                             : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    // Overlong forms, surrogates, beyond U+10FFFF.
    if ((n == 3 && s[0] == 0xE0 && s[1] < 0xA0) || (n == 3 && s[0] == 0xED && s[1] >= 0xA0)
        || (n == 4 && s[0] == 0xF0 && s[1] < 0x90) || (n == 4 && s[0] == 0xF4 && s[1] >= 0x90))
        return 0;
    return n;
}

// Calls put for each ASCII byte, and writes valid multibyte sequences as
// they are (U+FFFD for invalid bytes).
static void
s_escape (FILE *out, const char *text, void (*put) (FILE *, unsigned char))
{
    const unsigned char *s = (const unsigned char *) (text ? text : "");
    while (*s) {
        int n = dash_utf8_length (s);
        if (n == 1)
            put (out, *s);
        else if (n > 1)
            fwrite (s, 1, (size_t) n, out);
        else
            fputs ("\xEF\xBF\xBD", out);
        s += n ? n : 1;
    }
}

static void
s_put_html_byte (FILE *out, unsigned char c)
{
    switch (c) {
    case '&': fputs ("&amp;", out); break;
    case '<': fputs ("&lt;", out); break;
    case '>': fputs ("&gt;", out); break;
    case '"': fputs ("&quot;", out); break;
    case '\'': fputs ("&#39;", out); break;
    default:
        if (c < 0x20 && c != '\n' && c != '\t')
            fputs ("\xEF\xBF\xBD", out);  // control characters have no place on a page
        else
            fputc (c, out);
    }
}

void
dash_put_html (FILE *out, const char *text)
{
    s_escape (out, text, s_put_html_byte);
}

static void
s_put_json_byte (FILE *out, unsigned char c)
{
    switch (c) {
    case '"': fputs ("\\\"", out); break;
    case '\\': fputs ("\\\\", out); break;
    case '\n': fputs ("\\n", out); break;
    case '\t': fputs ("\\t", out); break;
    case '\r': fputs ("\\r", out); break;
    default:
        // < > & as well: the JSON stays inert if pasted into a page.
        if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7F)
            fprintf (out, "\\u%04x", c);
        else
            fputc (c, out);
    }
}

void
dash_put_json (FILE *out, const char *text)
{
    fputc ('"', out);
    s_escape (out, text, s_put_json_byte);
    fputc ('"', out);
}

void
dash_put_json_number (FILE *out, double x)
{
    if (!isfinite (x))
        fputs ("null", out);
    else if (x == (double) (int64_t) x && fabs (x) < 9e15)
        fprintf (out, "%lld", (long long) x);
    else
        fprintf (out, "%.9g", x);
}

static void
s_put_prom_byte (FILE *out, unsigned char c)
{
    switch (c) {
    case '\\': fputs ("\\\\", out); break;
    case '"': fputs ("\\\"", out); break;
    case '\n': fputs ("\\n", out); break;
    default:
        if ((c < 0x20 && c != '\t') || c == 0x7F)
            fputs ("\xEF\xBF\xBD", out);  // a scraper's line must stay one line
        else
            fputc (c, out);
    }
}

void
dash_put_prom_label (FILE *out, const char *text)
{
    s_escape (out, text, s_put_prom_byte);
}
