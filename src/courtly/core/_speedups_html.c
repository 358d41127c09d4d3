/* courtly.core._speedups, its HTML half: compiled helpers for
 * courtly.core.maintext and courtly.core.links, each the exact twin of the
 * Python code it stands in for (tests/core/test_speedups_worker.py compares
 * them). The module itself (its method table) is in _speedups.c.
 *
 * attr_values(text, name) -> list[str]: maintext's raw scan of class/id
 *   attribute values, exactly as its regex (maintext._attr_values_py).
 * count_over(text, ch, limit) -> bool: text.count(ch) > limit (links).
 * link_anchors(...): the anchors of a page's link scan (links._Scan).
 *
 * Pure: no I/O; the only state is the interned attribute names made by
 * speedups_html_init(). Work is linear in the input (hostile pages).
 */

#include "_speedups.h"

#include <stdint.h>
#include <string.h>

/* A str's characters as the PyUnicode_READ macros take them. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len;
} Text;

static int text_of(PyObject *str, Text *t)
{
    if (PyUnicode_READY(str) < 0)
        return -1;
    t->kind = PyUnicode_KIND(str);
    t->data = PyUnicode_DATA(str);
    t->len = PyUnicode_GET_LENGTH(str);
    return 0;
}

/* attr_values(text, name) -> list[str]: what maintext's class/id scan
 * reads, exactly: the values of the matches of the regex
 *     name\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))
 * found by re.finditer over `text` (leftmost, non-overlapping, case-sensitive;
 * \s is Py_UNICODE_ISSPACE as in re's str patterns), keeping only the matches
 * whose preceding character is one of  \t\n\r\f"'/  (a match at 0 is not
 * kept: "data-id=", "grid=" are no id). `name` is ASCII. Linear: a failed
 * quoted match scans to the next quote of its kind, which only the last
 * such quote of the text can fail to find; see find_name for the rest. */
static int attr_name_before(Py_UCS4 ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '"' || ch == '\'' || ch == '/';
}

/* The start of the next match candidate at or after `pos`: a `name`
 * followed by whitespace and '='. The search goes by '=' (rare in text,
 * memchr on 1-byte strings) and looks back over whitespace for `name`:
 * each '=' has at most one candidate, and candidates come in the order of
 * their '=', so this finds the regex's leftmost match start among those not
 * before `pos`. *eq receives the position of the '='. */
static Py_ssize_t find_name(int kind, const void *data, Py_ssize_t len, const char *name, Py_ssize_t nlen,
                            Py_ssize_t pos, Py_ssize_t *eq)
{
    for (Py_ssize_t e = pos + nlen; e < len; e++) {
        if (kind == PyUnicode_1BYTE_KIND) {
            const unsigned char *base = (const unsigned char *)data;
            const unsigned char *hit = memchr(base + e, '=', (size_t)(len - e));
            if (hit == NULL)
                return -1;
            e = (Py_ssize_t)(hit - base);
        } else if (PyUnicode_READ(kind, data, e) != '=') {
            continue;
        }
        Py_ssize_t p = e;
        while (p > pos && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, p - 1)))
            p--;
        Py_ssize_t at = p - nlen, k = 0;
        if (at < pos)
            continue;
        while (k < nlen && PyUnicode_READ(kind, data, at + k) == (Py_UCS4)(unsigned char)name[k])
            k++;
        if (k == nlen) {
            *eq = e;
            return at;
        }
    }
    return -1;
}

/* The match of the attribute pattern whose '=' is at `j`: 1 with the
 * value in [*vs, *ve) and the match's end in *end, or 0. */
static int attr_match(int kind, const void *data, Py_ssize_t len, Py_ssize_t j, Py_ssize_t *vs, Py_ssize_t *ve,
                      Py_ssize_t *end)
{
    j++; /* the '=' */
    while (j < len && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
        j++;
    if (j >= len)
        return 0;
    Py_UCS4 c = PyUnicode_READ(kind, data, j);
    if (c == '"' || c == '\'') {
        Py_ssize_t q = j + 1;
        if (kind == PyUnicode_1BYTE_KIND) {
            const unsigned char *base = (const unsigned char *)data;
            const unsigned char *hit = memchr(base + q, (int)c, (size_t)(len - q));
            q = hit == NULL ? len : (Py_ssize_t)(hit - base);
        } else {
            while (q < len && PyUnicode_READ(kind, data, q) != c)
                q++;
        }
        if (q >= len)
            return 0;
        *vs = j + 1;
        *ve = q;
        *end = q + 1;
        return 1;
    }
    Py_ssize_t k = j;
    while (k < len) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, k);
        if (ch == '"' || ch == '\'' || ch == '>' || Py_UNICODE_ISSPACE(ch))
            break;
        k++;
    }
    if (k == j)
        return 0;
    *vs = j;
    *ve = k;
    *end = k;
    return 1;
}

PyObject *speedups_attr_values(PyObject *self, PyObject *args)
{
    PyObject *text;
    const char *name;
    Py_ssize_t nlen;
    if (!PyArg_ParseTuple(args, "Us#:attr_values", &text, &name, &nlen))
        return NULL;
    if (nlen < 1 || (Py_ssize_t)strlen(name) != nlen) {
        PyErr_SetString(PyExc_ValueError, "attr_values() needs a non-empty name");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nlen; k++)
        if ((unsigned char)name[k] >= 0x80) {
            PyErr_SetString(PyExc_ValueError, "attr_values() needs an ASCII name");
            return NULL;
        }
    Text t;
    if (text_of(text, &t) < 0)
        return NULL;
    int kind = t.kind;
    const void *data = t.data;
    Py_ssize_t len = t.len;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    for (;;) {
        Py_ssize_t eq, vs, ve, end, at = find_name(kind, data, len, name, nlen, pos, &eq);
        if (at < 0)
            break;
        if (!attr_match(kind, data, len, eq, &vs, &ve, &end)) {
            pos = at + 1;
            continue;
        }
        pos = end;
        if (at == 0 || !attr_name_before(PyUnicode_READ(kind, data, at - 1)))
            continue;
        PyObject *value = PyUnicode_Substring(text, vs, ve);
        if (value == NULL || PyList_Append(out, value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    return out;
}

/* count_over(text, ch, limit) -> bool: text.count(ch) > limit, stopping
 * at the first one past `limit` (memchr on 1-byte strings: cheaper than
 * str.count on a page whose '<' are sparse; equal by
 * test_speedups_worker.py::test_native_count_over_is_str_count). */
PyObject *speedups_count_over(PyObject *self, PyObject *args)
{
    PyObject *text;
    int ch;
    Py_ssize_t limit, seen = 0;
    Text t;
    if (!PyArg_ParseTuple(args, "UCn:count_over", &text, &ch, &limit) || text_of(text, &t) < 0)
        return NULL;
    int kind = t.kind;
    const void *data = t.data;
    Py_ssize_t len = t.len;
    if (kind == PyUnicode_1BYTE_KIND) {
        if (ch < 0x100) {
            const unsigned char *p = (const unsigned char *)data, *end = p + len;
            while (seen <= limit && (p = memchr(p, ch, (size_t)(end - p))) != NULL) {
                seen++;
                p++;
            }
        }
    } else {
        for (Py_ssize_t i = 0; i < len && seen <= limit; i++)
            seen += PyUnicode_READ(kind, data, i) == (Py_UCS4)ch;
    }
    return PyBool_FromLong(seen > limit);
}

/* ---------------------------------------------------------------- Links
 *
 * link_anchors(nodes, start, links, index, links_max, base, fallback) -> int
 * does for the run of <a>/<area> nodes at nodes[start:] what links._Scan
 * does for each (`anchor` when the scan is not full), and returns the index
 * of the first node that is neither (or len(nodes)). `base` is the
 * resolver's (scheme, origin, directory or None); the caller passes it only
 * when the resolver is `fast`. `links` (a list of (url, kind, nofollow)
 * tuples) and `index` (url -> position) are the scan's own: the Python code
 * and this share them. An anchor this code does not take in full (a tab or
 * newline in the href, a backslash, a dot segment, a colon in a relative
 * reference, a non-ASCII rel, ...) goes to `fallback(tag, attrs)`, the
 * scan's Python `anchor`, which does the same and more; so the results are
 * the Python code's by construction on those, and by the tests on the rest.
 * A node's tag and attributes are read as the Python code reads them
 * (`node.tag`, `node.attributes`). */

static PyObject *STR_TAG, *STR_ATTRIBUTES, *STR_HREF, *STR_REL, *STR_A, *STR_AREA;

static int ascii_lower(Py_UCS4 c) { return c >= 'A' && c <= 'Z' ? (int)c + 32 : (int)c; }

/* text[at:at+n] equals the lowercase ASCII word `word`, letters in any case */
static int word_at(int kind, const void *data, Py_ssize_t at, Py_ssize_t n, const char *word)
{
    if ((Py_ssize_t)strlen(word) != n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (ascii_lower(PyUnicode_READ(kind, data, at + k)) != word[k])
            return 0;
    return 1;
}

static int has_pair(int kind, const void *data, Py_ssize_t from, Py_ssize_t len, Py_UCS4 a, Py_UCS4 b)
{
    for (Py_ssize_t i = from; i + 1 < len; i++)
        if (PyUnicode_READ(kind, data, i) == a && PyUnicode_READ(kind, data, i + 1) == b)
            return 1;
    return 0;
}

static int has_char(int kind, const void *data, Py_ssize_t from, Py_ssize_t len, Py_UCS4 a)
{
    for (Py_ssize_t i = from; i < len; i++)
        if (PyUnicode_READ(kind, data, i) == a)
            return 1;
    return 0;
}

static int starts_with(int kind, const void *data, Py_ssize_t from, Py_ssize_t len, const char *prefix)
{
    Py_ssize_t n = (Py_ssize_t)strlen(prefix);
    if (len - from < n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyUnicode_READ(kind, data, from + k) != (Py_UCS4)(unsigned char)prefix[k])
            return 0;
    return 1;
}

enum { HREF_SKIP = 0, HREF_DONE = 1, HREF_PYTHON = 2 };

/* The anchor's target as links._Scan reads it: HREF_SKIP (not crawlable, no
 * link), HREF_DONE with a new reference in *target, or HREF_PYTHON (the
 * Python code must decide). */
static int anchor_target(PyObject *href, PyObject *base, PyObject **target)
{
    *target = NULL;
    if (href == NULL || href == Py_None)
        return HREF_SKIP;
    if (!PyUnicode_Check(href) || PyUnicode_READY(href) < 0)
        return HREF_PYTHON;
    int kind = PyUnicode_KIND(href);
    const void *data = PyUnicode_DATA(href);
    Py_ssize_t start = 0, end = PyUnicode_GET_LENGTH(href);
    /* clean_href: strip C0 and space at both ends; tab/newline inside: Python */
    while (start < end && PyUnicode_READ(kind, data, start) <= 0x20)
        start++;
    while (end > start && PyUnicode_READ(kind, data, end - 1) <= 0x20)
        end--;
    if (start == end || PyUnicode_READ(kind, data, start) == '#')
        return HREF_SKIP;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '\t' || c == '\n' || c == '\r' || c == '\\')
            return HREF_PYTHON;
    }
    /* a scheme of javascript:, mailto:, tel:, data: is not crawlable */
    Py_UCS4 c0 = PyUnicode_READ(kind, data, start);
    if ((c0 >= 'A' && c0 <= 'Z') || (c0 >= 'a' && c0 <= 'z')) {
        Py_ssize_t j = start + 1;
        for (; j < end; j++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, j);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '.'
                  || c == '-'))
                break;
        }
        if (j < end && PyUnicode_READ(kind, data, j) == ':') {
            Py_ssize_t n = j - start;
            if (word_at(kind, data, start, n, "javascript") || word_at(kind, data, start, n, "mailto")
                || word_at(kind, data, start, n, "tel") || word_at(kind, data, start, n, "data"))
                return HREF_SKIP;
        }
    }
    /* Resolver.__call__'s fast paths (its base is `fast`) */
    PyObject *scheme = PyTuple_GET_ITEM(base, 0), *origin = PyTuple_GET_ITEM(base, 1);
    PyObject *directory = PyTuple_GET_ITEM(base, 2);
    PyObject *ref = PyUnicode_Substring(href, start, end);
    if (ref == NULL)
        return -1;
    Py_ssize_t len = end - start;
    data = PyUnicode_DATA(ref);
    kind = PyUnicode_KIND(ref);
    /* a run of three slashes or more before the host (Resolver.__call__): Python */
    if (starts_with(kind, data, 0, len, "///") || starts_with(kind, data, 0, len, "http:///")
        || starts_with(kind, data, 0, len, "https:///")) {
        Py_DECREF(ref);
        return HREF_PYTHON;
    }
    if (!has_pair(kind, data, 0, len, '/', '.')) {
        if (starts_with(kind, data, 0, len, "http://") || starts_with(kind, data, 0, len, "https://")) {
            *target = ref;
            return HREF_DONE;
        }
        if (starts_with(kind, data, 0, len, "//")) {
            *target = PyUnicode_FromFormat("%U:%U", scheme, ref);
            Py_DECREF(ref);
            return *target == NULL ? -1 : HREF_DONE;
        }
        if (starts_with(kind, data, 0, len, "/")) {
            *target = PyUnicode_Concat(origin, ref);
            Py_DECREF(ref);
            return *target == NULL ? -1 : HREF_DONE;
        }
    }
    Py_UCS4 first = PyUnicode_READ(kind, data, 0);
    if (directory == Py_None || has_char(kind, data, 0, len, ':') || first == '/' || first == '?' || first == '#') {
        Py_DECREF(ref);
        return HREF_PYTHON;
    }
    /* Resolver._relative: one directory up per leading "../" */
    Py_ssize_t rest = 0, dir_len = PyUnicode_GET_LENGTH(directory);
    int dkind = PyUnicode_KIND(directory);
    const void *ddata = PyUnicode_DATA(directory);
    while (starts_with(kind, data, rest, len, "../")) {
        rest += 3;
        if (dir_len > 1) {
            Py_ssize_t k = dir_len - 2;
            while (k > 0 && PyUnicode_READ(dkind, ddata, k) != '/')
                k--;
            dir_len = k + 1;
        }
    }
    if ((rest < len && PyUnicode_READ(kind, data, rest) == '.') || has_pair(kind, data, rest, len, '/', '.')) {
        Py_DECREF(ref);
        return HREF_PYTHON;
    }
    PyObject *dir = PyUnicode_Substring(directory, 0, dir_len);
    PyObject *tail = dir == NULL ? NULL : PyUnicode_Substring(ref, rest, len);
    Py_DECREF(ref);
    if (tail == NULL) {
        Py_XDECREF(dir);
        return -1;
    }
    *target = PyUnicode_FromFormat("%U%U%U", origin, dir, tail);
    Py_DECREF(dir);
    Py_DECREF(tail);
    return *target == NULL ? -1 : HREF_DONE;
}

/* rel has nofollow, ugc or sponsored among its whitespace-separated words
 * (any case): 0 or 1; 2 when the Python code must read it (not ASCII). */
static int rel_nofollow(PyObject *rel)
{
    if (rel == NULL || rel == Py_None)
        return 0;
    if (!PyUnicode_Check(rel) || PyUnicode_READY(rel) < 0 || !PyUnicode_IS_ASCII(rel))
        return 2;
    const unsigned char *s = PyUnicode_1BYTE_DATA(rel);
    Py_ssize_t len = PyUnicode_GET_LENGTH(rel), i = 0;
    while (i < len) {
        while (i < len && Py_UNICODE_ISSPACE(s[i]))
            i++;
        Py_ssize_t from = i;
        while (i < len && !Py_UNICODE_ISSPACE(s[i]))
            i++;
        Py_ssize_t n = i - from;
        if (n && (word_at(PyUnicode_1BYTE_KIND, s, from, n, "nofollow") || word_at(PyUnicode_1BYTE_KIND, s, from, n, "ugc")
                  || word_at(PyUnicode_1BYTE_KIND, s, from, n, "sponsored")))
            return 1;
    }
    return 0;
}

/* _Scan.add: the first occurrence of a URL is kept (with its kind); a later
 * followed one makes it followed. Steals `url`. */
static int scan_add(PyObject *links, PyObject *index, PyObject *url, PyObject *kind, int nofollow,
                    Py_ssize_t links_max)
{
    PyObject *at = PyDict_GetItemWithError(index, url);
    int rc = 0;
    if (at == NULL) {
        if (PyErr_Occurred()) {
            rc = -1;
        } else if (PyList_GET_SIZE(links) < links_max) {
            PyObject *pos = PyLong_FromSsize_t(PyList_GET_SIZE(links));
            PyObject *item = pos == NULL ? NULL : Py_BuildValue("(OOO)", url, kind, nofollow ? Py_True : Py_False);
            rc = item == NULL || PyDict_SetItem(index, url, pos) < 0 || PyList_Append(links, item) < 0 ? -1 : 0;
            Py_XDECREF(pos);
            Py_XDECREF(item);
        }
    } else if (!nofollow) {
        Py_ssize_t i = PyLong_AsSsize_t(at);
        if (i == -1 && PyErr_Occurred()) {
            rc = -1;
        } else {
            PyObject *old = i >= 0 && i < PyList_GET_SIZE(links) ? PyList_GET_ITEM(links, i) : NULL;
            if (old == NULL || !PyTuple_Check(old) || PyTuple_GET_SIZE(old) != 3) {
                PyErr_SetString(PyExc_ValueError, "link_anchors: index and links disagree");
                rc = -1;
            } else if (PyTuple_GET_ITEM(old, 2) == Py_True) {
                PyObject *item = Py_BuildValue("(OOO)", url, PyTuple_GET_ITEM(old, 1), Py_False);
                rc = item == NULL || PyList_SetItem(links, i, item) < 0 ? -1 : 0; /* steals item */
            }
        }
    }
    Py_DECREF(url);
    return rc;
}

/* One <a>/<area> node: 0 done, -1 error. */
static int take_anchor(PyObject *tag, PyObject *attrs, PyObject *links, PyObject *index, Py_ssize_t links_max,
                       PyObject *base, PyObject *fallback)
{
    PyObject *target = NULL;
    int how = PyDict_Check(attrs) ? anchor_target(PyDict_GetItemWithError(attrs, STR_HREF), base, &target)
                                  : HREF_PYTHON;
    if (how < 0 || PyErr_Occurred()) {
        Py_XDECREF(target);
        return -1;
    }
    if (how == HREF_SKIP)
        return 0;
    int nofollow = how == HREF_DONE ? rel_nofollow(PyDict_GetItemWithError(attrs, STR_REL)) : 2;
    if (PyErr_Occurred()) {
        Py_XDECREF(target);
        return -1;
    }
    if (nofollow == 2) {
        Py_XDECREF(target);
        PyObject *r = PyObject_CallFunctionObjArgs(fallback, tag, attrs, NULL);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    return scan_add(links, index, target, tag, nofollow, links_max);
}

PyObject *speedups_link_anchors(PyObject *self, PyObject *args)
{
    PyObject *nodes, *links, *index, *base, *fallback;
    Py_ssize_t start, links_max;
    if (!PyArg_ParseTuple(args, "O!nO!O!nO!O:link_anchors", &PyList_Type, &nodes, &start, &PyList_Type, &links,
                          &PyDict_Type, &index, &links_max, &PyTuple_Type, &base, &fallback))
        return NULL;
    if (PyTuple_GET_SIZE(base) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(base, 0))
        || !PyUnicode_Check(PyTuple_GET_ITEM(base, 1))
        || (PyTuple_GET_ITEM(base, 2) != Py_None && !PyUnicode_Check(PyTuple_GET_ITEM(base, 2)))) {
        PyErr_SetString(PyExc_TypeError, "link_anchors: base must be (scheme, origin, directory or None)");
        return NULL;
    }
    Py_ssize_t i = start < 0 ? 0 : start;
    for (; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        Py_INCREF(node);
        PyObject *tag = PyObject_GetAttr(node, STR_TAG);
        int anchor = tag != NULL && PyUnicode_Check(tag)
                     && (PyUnicode_Compare(tag, STR_A) == 0 || PyUnicode_Compare(tag, STR_AREA) == 0);
        int rc = tag == NULL ? -1 : 0;
        if (anchor && PyList_GET_SIZE(links) < links_max) {
            PyObject *attrs = PyObject_GetAttr(node, STR_ATTRIBUTES);
            rc = attrs == NULL ? -1 : take_anchor(tag, attrs, links, index, links_max, base, fallback);
            Py_XDECREF(attrs);
        }
        Py_XDECREF(tag);
        Py_DECREF(node);
        if (rc < 0)
            return NULL;
        if (!anchor)
            break;
    }
    return PyLong_FromSsize_t(i);
}

int speedups_html_init(void)
{
    STR_TAG = PyUnicode_InternFromString("tag");
    STR_ATTRIBUTES = PyUnicode_InternFromString("attributes");
    STR_HREF = PyUnicode_InternFromString("href");
    STR_REL = PyUnicode_InternFromString("rel");
    STR_A = PyUnicode_InternFromString("a");
    STR_AREA = PyUnicode_InternFromString("area");
    return STR_TAG && STR_ATTRIBUTES && STR_HREF && STR_REL && STR_A && STR_AREA ? 0 : -1;
}
