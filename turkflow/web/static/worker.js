/* Worker pages: small progressive enhancements. The server validates everything; without this script the
   pages still work (the URL field is always shown, the queue has a "Check now" link). */
(function () {
  "use strict";

  // The teacher writes in their own words: pasting or dropping text into the response box is refused.
  function blockPaste(box) {
    var note = box.parentNode.querySelector(".paste-note");
    ["paste", "drop"].forEach(function (type) {
      box.addEventListener(type, function (event) {
        event.preventDefault();
        if (note) { note.classList.add("flash"); setTimeout(function () { note.classList.remove("flash"); }, 1200); }
      });
    });
  }

  // A question that only some answers call for (URLs for external knowledge) is shown, and required,
  // only while one of those answers is chosen.
  function revealWith(question, form) {
    var name = question.getAttribute("data-reveal-name");
    var values = question.getAttribute("data-reveal-values").split(" ");
    var input = question.querySelector("textarea, input");
    function update() {
      var chosen = form.querySelector('input[name="' + name + '"]:checked');
      var shown = (chosen && values.indexOf(chosen.value) !== -1) || (input && input.value.trim() !== "");
      question.hidden = !shown;
      if (input) { input.required = Boolean(chosen && values.indexOf(chosen.value) !== -1); }
    }
    form.querySelectorAll('input[name="' + name + '"]').forEach(function (radio) {
      radio.addEventListener("change", update);
    });
    update();
  }

  function countShared(counter, form) {
    var name = counter.getAttribute("data-shared-count");
    function update() {
      var n = form.querySelectorAll('input[name="' + name + '"]:checked').length;
      counter.textContent = n + (n === 1 ? " item" : " items") + " selected.";
    }
    form.addEventListener("change", update);
    update();
  }

  function countDown(lease) {
    var expires = Date.parse(lease.getAttribute("data-lease-expires"));
    function update() {
      var left = Math.round((expires - Date.now()) / 1000);
      if (left <= 0) {
        lease.textContent = "Your time on this turn is up: another worker may take it.";
        lease.classList.add("expired");
        return;
      }
      var minutes = Math.floor(left / 60), seconds = left % 60;
      lease.textContent = "Time left on this turn: " + minutes + ":" + (seconds < 10 ? "0" : "") + seconds;
      setTimeout(update, 1000);
    }
    if (!isNaN(expires)) { update(); }
  }

  // What the page can honestly see of how the response was written, sent with the turn as evidence for a
  // reviewer (the server never refuses a turn for it): time on the page, time to the first keystroke,
  // keystrokes, paste and drop attempts, and how often the window lost focus. Only the person's own input
  // counts (isTrusted); shortcuts like Ctrl+V type nothing. After a refused submission the server sends the
  // report back with the refilled text, and counting goes on from it.
  function recordWriting(form, field) {
    var box = form.querySelector("[data-response]");
    var opened = performance.now();
    var before = {};
    try { before = JSON.parse(field.value) || {}; } catch (error) { before = {}; }
    function carried(name) { var n = Number(before[name]); return isFinite(n) && n > 0 ? Math.round(n) : 0; }
    var counts = {keys: carried("keys"), pastes: carried("pastes"), drops: carried("drops"), blurs: carried("blurs")};
    var firstKey = before.first_key_ms == null ? null : carried("first_key_ms");
    function pageMs() { return carried("page_ms") + Math.round(performance.now() - opened); }
    function count(name) { return function (event) { if (event.isTrusted) { counts[name] += 1; } }; }
    if (box) {
      box.addEventListener("keydown", function (event) {
        if (!event.isTrusted || event.ctrlKey || event.metaKey ||
            ["Shift", "Control", "Alt", "Meta", "CapsLock"].indexOf(event.key) !== -1) { return; }
        counts.keys += 1;
        if (firstKey === null) { firstKey = pageMs(); }
      });
      box.addEventListener("paste", count("pastes"));
      box.addEventListener("drop", count("drops"));
    }
    window.addEventListener("blur", count("blurs"));
    form.addEventListener("submit", function () {
      field.value = JSON.stringify({page_ms: pageMs(), first_key_ms: firstKey, keys: counts.keys,
                                    pastes: counts.pastes, drops: counts.drops, blurs: counts.blurs});
    });
  }

  // The empty queue asks the server (JSON) every few seconds instead of reloading itself. When turns open it
  // puts the queue page in place of this one (the server's own page, so nothing is rendered twice), says so
  // to screen readers and in the tab's title, for a worker busy in another tab.
  function watchQueue(empty) {
    var every = 1000 * Number(empty.getAttribute("data-refresh-seconds"));
    var url = empty.getAttribute("data-queue-url");
    var title = document.title;
    function check() {
      fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
        .then(function (answer) { return answer.ok ? answer.json() : {open: []}; })
        .then(function (queue) {
          if (!queue.open || queue.open.length === 0) { setTimeout(check, every); return; }
          return fetch(url, {credentials: "same-origin"}).then(function (answer) { return answer.text(); })
            .then(function (page) {
              var fresh = new DOMParser().parseFromString(page, "text/html").querySelector("main");
              if (!fresh) { setTimeout(check, every); return; }
              document.querySelector("main").innerHTML = fresh.innerHTML;
              var n = queue.open.length;
              document.title = "(" + n + ") " + (n === 1 ? "A turn is waiting" : "Turns are waiting") + " · " + title;
              var list = document.getElementById("open-turns");
              if (list) {
                var news = document.createElement("p");
                news.className = "visually-hidden";
                news.setAttribute("role", "status");
                news.textContent = n === 1 ? "A turn is waiting for you." : n + " turns are waiting for you.";
                list.parentNode.insertBefore(news, list);
              }
            });
        })
        .catch(function () { setTimeout(check, every); });
    }
    setTimeout(check, every);
  }

  // A page a worker waits on tells the server when they leave it (the tab closed, another site), so the turns a
  // batch keeps for them go to anyone at once; following this site's own links and forms is not leaving.
  function sayWhenLeaving(marker) {
    var inside = false;
    document.addEventListener("submit", function () { inside = true; }, true);
    document.addEventListener("click", function (event) {
      var link = event.target.closest ? event.target.closest("a[href]") : null;
      if (link && link.origin === window.location.origin) { inside = true; }
    }, true);
    window.addEventListener("pagehide", function () {
      if (inside || !navigator.sendBeacon) { return; }
      var body = new FormData();
      body.append(marker.getAttribute("data-leave-field"), marker.getAttribute("data-leave-token"));
      navigator.sendBeacon(marker.getAttribute("data-leave-url"), body);
    });
  }

  // A Prolific session's waiting screen asks the server (JSON) every few seconds whether a turn waits or the
  // session ended, and then follows its own "Check now" link (following it is not leaving); it counts down the
  // session's time.
  function watchPlace(waiting) {
    var every = 1000 * Number(waiting.getAttribute("data-place-every"));
    var url = waiting.getAttribute("data-place-url");
    function check() {
      fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
        .then(function (answer) { return answer.ok ? answer.json() : {waiting: true}; })
        .then(function (place) {
          if (place.waiting) { setTimeout(check, every); return; }
          document.getElementById("place-check").click();
        })
        .catch(function () { setTimeout(check, every); });
    }
    setTimeout(check, every);
    var clock = document.getElementById("place-time-left");
    var ends = Date.parse(clock.getAttribute("data-place-ends"));
    function update() {
      var left = Math.max(0, Math.round((ends - Date.now()) / 1000));
      var minutes = Math.floor(left / 60), seconds = left % 60;
      clock.textContent = "Time left in your session: " + minutes + ":" + (seconds < 10 ? "0" : "") + seconds;
      if (left > 0) { setTimeout(update, 1000); }
    }
    if (!isNaN(ends)) { update(); }
  }

  // One click sends the turn once; the server stores a turn once anyway.
  function submitOnce(form) {
    var sent = false;
    form.addEventListener("submit", function (event) {
      if (sent) { event.preventDefault(); return; }
      sent = true;
      var button = form.querySelector('button[type="submit"]');
      if (button) { button.classList.add("busy"); button.textContent = "Submitting…"; }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("turn-form");
    document.querySelectorAll("[data-no-paste]").forEach(blockPaste);
    if (form) {
      form.querySelectorAll("[data-reveal-name]").forEach(function (q) { revealWith(q, form); });
      form.querySelectorAll("[data-shared-count]").forEach(function (c) { countShared(c, form); });
      var signals = form.querySelector("[data-writing-signals]");
      if (signals) { recordWriting(form, signals); }
      submitOnce(form);
    }
    document.querySelectorAll("[data-lease-expires]").forEach(countDown);
    var empty = document.querySelector("[data-refresh-seconds]");
    if (empty) { watchQueue(empty); }
    var waiting = document.querySelector("[data-place-url]");
    if (waiting) { watchPlace(waiting); }
    var leaving = document.querySelector("[data-leave-url]");
    if (leaving) { sayWhenLeaving(leaving); }
  });
})();
