/* STAR's pages, enhanced: knowledge-base queries, browsing and selecting items, task tabs and "Suggest" run
   in place (JSON requests to the same routes the forms and links use, with the page's CSRF token); the
   results, the selected items and the suggested replies are drawn from the answer with textContent only.
   Without this script every form works by posting and reloading, every link by loading. */
(function () {
  "use strict";

  function token(form) {
    var field = form.querySelector('input[name="csrf_token"]');
    return field ? field.value : "";
  }

  function showError(message) {
    var box = document.getElementById("error-summary");
    if (!box) { return; }
    box.querySelector("[data-error-text]").textContent = message;
    box.hidden = !message;
  }

  // The form's fields as the JSON the action route reads: kb-<Field> fields become the query's form, a
  // list where several values are chosen (as the route reads a form post).
  function bodyOf(form, submitter) {
    var body = {}, kb = {};
    new FormData(form).forEach(function (value, name) {
      if (name === "csrf_token") { return; }
      if (name.indexOf("kb-") !== 0) { body[name] = value; return; }
      var key = name.slice(3);
      if (!(key in kb)) { kb[key] = value; } else if (Array.isArray(kb[key])) { kb[key].push(value); }
      else { kb[key] = [kb[key], value]; }
    });
    if (submitter && submitter.name) { body[submitter.name] = submitter.value; }
    if (Object.keys(kb).length) { body.form = kb; }
    return body;
  }

  function post(url, form, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": token(form)},
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) { throw new Error((data.field ? data.field + ": " : "") + (data.error || "refused")); }
        return data;
      });
    });
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function itemList(item) {
    var list = element("dl", "kb-item");
    Object.keys(item).forEach(function (key) {
      var value = item[key];
      list.appendChild(element("dt", "", key));
      list.appendChild(element("dd", "", Array.isArray(value) ? value.join(", ") : String(value)));
    });
    return list;
  }

  // Each result keeps the server-rendered controls' shape: Previous/Next links, the select form.
  function drawResults(log) {
    var box = document.querySelector("[data-kb-results]");
    var kb = document.getElementById("kb-form");
    if (!box || !kb) { return; }
    box.textContent = "";
    log.forEach(function (entry) {
      var article = element("article", "kb-entry");
      article.setAttribute("data-query", entry.event_id);
      article.setAttribute("data-position", entry.position);
      var conditions = entry.constraints.map(function (c) {
        return Object.keys(c).map(function (k) { return k + " = " + c[k]; }).join("; ");
      }).join("; ") || "(no conditions)";
      article.appendChild(element("p", "meta", entry.api.replace(/_/g, " ") + " · turn " +
                                  (entry.turn_index + 1) + " · " + conditions));
      if (entry.item) {
        article.appendChild(itemList(entry.item));
        article.appendChild(element("p", "meta kb-position", "Item " + (entry.position + 1) + " of " +
                                    entry.total));
        var controls = element("div", "kb-browse");
        [["prev", "Previous", entry.position - 1], ["next", "Next", entry.position + 1]].forEach(function (b) {
          if (!entry.browsable || b[2] < 0 || b[2] >= entry.total) { return; }
          var link = element("a", "button", b[1]);
          link.rel = b[0];
          link.setAttribute("data-browse", String(b[2]));
          link.href = browseUrl(entry.event_id, b[2]);
          controls.appendChild(link);
        });
        var form = element("form", "kb-select");
        form.method = "post";
        form.action = kb.getAttribute("action");
        kb.querySelectorAll('input[type="hidden"]').forEach(function (field) {
          if (field.name !== "action" && field.name !== "api") { form.appendChild(field.cloneNode()); }
        });
        [["query", entry.event_id], ["position", entry.position]].forEach(function (pair) {
          var field = element("input");
          field.type = "hidden"; field.name = pair[0]; field.value = String(pair[1]);
          form.appendChild(field);
        });
        [["select_primary", "Use as primary"], ["select_secondary", "Compare (secondary)"]].forEach(function (b) {
          var button = element("button", "button", b[1]);
          button.type = "submit"; button.name = "action"; button.value = b[0];
          form.appendChild(button);
        });
        controls.appendChild(form);
        article.appendChild(controls);
      } else {
        article.appendChild(element("p", "nothing-found", "Nothing found."));
      }
      box.appendChild(article);
    });
  }

  function drawSelected(selected) {
    ["primary", "secondary"].forEach(function (role) {
      var box = document.getElementById("kb-" + role);
      if (!box || !selected) { return; }
      var title = box.querySelector("h4");
      box.textContent = "";
      box.appendChild(title);
      var chosen = selected[role];
      if (chosen) {
        box.appendChild(element("p", "meta", String(chosen.api).replace(/_/g, " ")));
        box.appendChild(itemList(chosen.item));
      } else {
        box.appendChild(element("p", "meta", "None."));
      }
    });
  }

  // The turn page's address with the match to show (the page's own address keeps the link's ids).
  function browseUrl(queryId, position) {
    var url = new URL(window.location.href);
    url.hash = "";
    url.searchParams.delete("draft");
    url.searchParams.set("query", String(queryId));
    url.searchParams.set("position", String(position));
    return url.pathname + url.search + "#kb-results";
  }

  // The links to the pages of newer and older queries, for the page of them just drawn.
  function drawPages(wizard) {
    [["[data-kb-newer]", wizard.newer_queries], ["[data-kb-older]", wizard.older_queries]].forEach(function (p) {
      var line = document.querySelector(p[0]);
      if (!line) { return; }
      line.hidden = p[1] === null;
      if (p[1] === null) { return; }
      var url = new URL(window.location.href);
      url.hash = "";
      ["draft", "query", "position"].forEach(function (name) { url.searchParams.delete(name); });
      url.searchParams.set("older", String(p[1]));
      line.querySelector("a").href = url.pathname + url.search + "#kb-results";
    });
    var more = document.querySelector("[data-kb-more]");
    if (more && wizard.older_queries !== null) { more.textContent = String(wizard.kb_total - wizard.older_queries); }
  }

  function browse(link) {
    fetch(link.getAttribute("href").split("#")[0], {
      credentials: "same-origin", headers: {"Accept": "application/json"}
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) { throw new Error((data.field ? data.field + ": " : "") + (data.error || "refused")); }
        return data;
      });
    }).then(function (data) {
      showError("");
      drawResults(data.star.wizard.kb_log);
      drawPages(data.star.wizard);
      document.body.setAttribute("data-star-updated", String(Date.now()));
    }).catch(function (error) { showError(error.message); });
  }

  // "between" asks for a second number; the other conditions do not.
  function showEnds(form) {
    form.querySelectorAll("[data-kb-op]").forEach(function (op) {
      var end = op.closest(".kb-field").querySelector("[data-kb-to]");
      if (end) { end.hidden = op.value !== "between"; }
    });
  }

  // Each suggestion keeps its server-rendered form: only its label, text and the shown options change.
  function drawSuggestions(suggestions) {
    var list = document.querySelector("[data-suggestions]");
    var template = list && list.querySelector("li");
    if (!template) { return; }
    list.textContent = "";
    suggestions.forEach(function (s) {
      var item = template.cloneNode(true);
      var form = item.querySelector("form");
      form.querySelector('input[name="label"]').value = s.label;
      form.querySelectorAll('input[name="options"]').forEach(function (o) { o.remove(); });
      suggestions.forEach(function (other) {
        var option = element("input");
        option.type = "hidden"; option.name = "options"; option.value = other.label;
        form.appendChild(option);
      });
      var button = form.querySelector("button");
      button.textContent = s.text;
      button.setAttribute("data-label", s.label);
      button.disabled = s.missing.length > 0;
      var note = form.querySelector(".meta");
      if (note) { note.remove(); }
      if (s.missing.length) { form.appendChild(element("span", "meta", "needs " + s.missing.join(", ") +
                                                       " from the knowledge base")); }
      list.appendChild(item);
      guardOnce(form);
    });
  }

  function redraw(data) {
    if (!data.wizard) { return; }
    drawResults(data.wizard.kb_log);
    drawPages(data.wizard);
    drawSelected(data.wizard.selected);
    drawSuggestions(data.wizard.suggestions);
  }

  function inPlace(form, url, submitter) {
    var button = submitter || form.querySelector('button[type="submit"]');
    if (button) { button.disabled = true; }
    post(url, form, bodyOf(form, submitter)).then(function (data) {
      showError("");
      redraw(data);
      document.body.setAttribute("data-star-updated", String(Date.now()));
    }).catch(function (error) { showError(error.message); }).then(function () {
      if (button) { button.disabled = false; }
    });
  }

  // A form that sends the turn is sent once, however often it is clicked.
  function guardOnce(form) {
    if (form.getAttribute("data-guarded")) { return; }
    form.setAttribute("data-guarded", "yes");
    var sent = false;
    form.addEventListener("submit", function (event) {
      var submitter = event.submitter;
      if (submitter && submitter.getAttribute("formaction")) { return; }  // "Suggest" stays in the turn
      if (sent) { event.preventDefault(); return; }
      sent = true;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var kb = document.getElementById("kb-form");
    if (kb) {
      kb.addEventListener("submit", function (event) {
        event.preventDefault();
        inPlace(kb, kb.getAttribute("action"), event.submitter);
      });
      kb.addEventListener("change", function () { showEnds(kb); });
      showEnds(kb);
    }
    var results = document.querySelector("[data-kb-results]");
    if (results) {
      results.addEventListener("click", function (event) {
        var link = event.target.closest("a[data-browse]");
        if (link) { event.preventDefault(); browse(link); }
      });
      results.addEventListener("submit", function (event) {
        var form = event.target.closest("form.kb-select");
        if (form) { event.preventDefault(); inPlace(form, form.getAttribute("action"), event.submitter); }
      });
    }
    var reply = document.getElementById("reply-form");
    if (reply) {
      reply.addEventListener("submit", function (event) {
        var submitter = event.submitter;
        if (submitter && submitter.value === "request_suggestions") {
          event.preventDefault();
          inPlace(reply, submitter.getAttribute("formaction"), submitter);
        }
      });
    }
    document.querySelectorAll("[data-star-submit]").forEach(guardOnce);
  });
})();
