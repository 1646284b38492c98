/* STAR's pages, enhanced: knowledge-base queries, task tabs and "Suggest" run in place (JSON POSTs to the
   same routes the forms use, with the page's CSRF token); the results and the suggested replies are drawn
   from the answer with textContent only. Without this script every form works by posting and reloading. */
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

  // The form's fields as the JSON the action route reads: kb-<Field> fields become the query's form.
  function bodyOf(form, submitter) {
    var body = {}, kb = {};
    new FormData(form).forEach(function (value, name) {
      if (name === "csrf_token") { return; }
      if (name.indexOf("kb-") === 0) { kb[name.slice(3)] = value; } else { body[name] = value; }
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

  function drawResults(log) {
    var box = document.querySelector("[data-kb-results]");
    if (!box) { return; }
    box.textContent = "";
    log.forEach(function (entry) {
      var article = element("article", "kb-entry");
      var conditions = entry.constraints.map(function (c) {
        return Object.keys(c).map(function (k) { return k + " = " + c[k]; }).join("; ");
      }).join("; ") || "(no conditions)";
      article.appendChild(element("p", "meta", entry.api.replace(/_/g, " ") + " · turn " +
                                  (entry.turn_index + 1) + " · " + conditions));
      if (entry.item) {
        var list = element("dl", "kb-item");
        Object.keys(entry.item).forEach(function (key) {
          var value = entry.item[key];
          list.appendChild(element("dt", "", key));
          list.appendChild(element("dd", "", Array.isArray(value) ? value.join(", ") : String(value)));
        });
        article.appendChild(list);
        article.appendChild(element("p", "meta", entry.total + (entry.total === 1 ? " item matches" :
                                    " items match") + "; this is the first."));
      } else {
        article.appendChild(element("p", "nothing-found", "Nothing found."));
      }
      box.appendChild(article);
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
