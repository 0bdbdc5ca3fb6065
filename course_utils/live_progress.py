"""The course home's progress table, kept current while the home is open in JupyterLab.

A notebook's outputs are what was saved: the home opened at launch would show the progress of that
moment, however many checks pass after it. So every check rewrites the home's progress output in the
learner's work folder (``learner.refresh_homes``), and that output carries a short script which, while
the home is shown, asks JupyterLab's server every few seconds whether the home's file changed and,
when it did, puts the table saved there in place of the one shown. No kernel runs for it, and nothing
is computed in the browser: the table is the one Python wrote, in the home's language.

JupyterLab runs a script in an output only in a notebook it trusts (one signed with the learner's own
Jupyter key, which ``learner.refresh_homes`` does after writing the home). Elsewhere (a home that is
not trusted, GitHub, nbviewer) the script is dropped and the table shows as it was saved.
"""

import html
import json
import os

#: What marks the table's box, with the home's path (relative to JupyterLab's root) as its value.
ATTRIBUTE = "data-course-progress"
#: How often an open home asks whether its file changed (a request for its date only, no content).
POLL_MS = 2000
#: Polls after which a box that left the page (its home closed) is forgotten.
FORGET_AFTER = 60

_SCRIPT = """(function () {
  var path = %(path)s, tag = %(tag)s, attribute = %(attribute)s;
  var box = document.currentScript && document.currentScript.previousElementSibling;
  var homes = window.courseProgressHomes = window.courseProgressHomes || {};
  var home = homes[path];
  if (!home) {
    home = homes[path] = {boxes: [], seen: null};
    var config = {};
    try { config = JSON.parse(document.getElementById("jupyter-config-data").textContent); } catch (e) {}
    var base = (config.baseUrl || "/").replace(/\\/?$/, "/");
    var headers = config.token ? {Authorization: "token " + config.token} : {};
    var url = function (content) {
      return base + "api/contents/" + path.split("/").map(encodeURIComponent).join("/") +
        "?type=notebook&content=" + content + "&_=" + Date.now();
    };
    var get = function (content) {
      return fetch(url(content), {headers: headers, credentials: "same-origin", cache: "no-store"})
        .then(function (answer) { return answer.ok ? answer.json() : null; });
    };
    var show = function (model) {
      var cell = (model.content.cells || []).filter(function (c) {
        return ((c.metadata || {}).tags || []).indexOf(tag) >= 0;
      })[0];
      var saved = null;
      (cell ? cell.outputs || [] : []).forEach(function (output) {
        var data = (output.data || {})["text/html"];
        if (data && !saved) { saved = Array.isArray(data) ? data.join("") : data; }
      });
      var found = saved && new DOMParser().parseFromString(saved, "text/html").querySelector("[" + attribute + "]");
      if (!found) { return; }
      home.seen = model.last_modified;
      home.boxes.forEach(function (entry) {
        if (entry.box.innerHTML !== found.innerHTML) { entry.box.innerHTML = found.innerHTML; }
      });
    };
    home.timer = setInterval(function () {
      home.boxes = home.boxes.filter(function (entry) {
        entry.away = entry.box.isConnected ? 0 : entry.away + 1;  // (a cell out of view may be detached a while)
        return entry.away < %(forget)d;
      });
      if (!home.boxes.length) { clearInterval(home.timer); delete homes[path]; return; }
      get(0).then(function (model) {
        if (model && model.last_modified !== home.seen) {
          return get(1).then(function (full) { if (full) { show(full); } });
        }
      }).catch(function () {});
    }, %(poll)d);
  }
  if (box && box.hasAttribute(attribute)) { home.boxes.push({box: box, away: 0}); }
})();"""


def live_html(table_html, home, tag):
    """The home's progress output as HTML: `table_html` (what the table shows now) in a box that the
    script after it keeps current from the home's file (`home`: its path from JupyterLab's root, such
    as "en/index.ipynb"; `tag`: the tag of the home's progress cell)."""
    script = _SCRIPT % {"path": json.dumps(home), "tag": json.dumps(tag), "attribute": json.dumps(ATTRIBUTE),
                        "poll": POLL_MS, "forget": FORGET_AFTER}
    return f'<div {ATTRIBUTE}="{html.escape(home, quote=True)}">{table_html}</div><script>{script}</script>'


def trust(path):
    """Sign the notebook at `path` with the learner's Jupyter key (what `jupyter trust` does), so that
    JupyterLab runs the script of its progress output. Returns whether it did: where it cannot (no
    writable Jupyter data folder, a notebook it cannot read), the home shows its table as saved."""
    try:
        # imported here, not above: traitlets' configuration machinery takes a second to import, and only
        # writing a home needs it (every lesson imports this package)
        import nbformat
        from nbformat.sign import NotebookNotary

        notary = NotebookNotary()
        os.makedirs(notary.data_dir, exist_ok=True)  # (a fresh machine has none: the notary would keep it in memory)
        notebook = nbformat.read(path, as_version=4)
        notary.sign(notebook)
        return notary.check_signature(notebook)
    except Exception:  # (sqlite, a read-only folder, a file changed meanwhile) signing is a convenience: never fail for it
        return False
