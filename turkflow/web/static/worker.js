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
      submitOnce(form);
    }
    document.querySelectorAll("[data-lease-expires]").forEach(countDown);
    var empty = document.querySelector("[data-refresh-seconds]");
    if (empty) {
      setTimeout(function () { window.location.reload(); },
                 1000 * Number(empty.getAttribute("data-refresh-seconds")));
    }
  });
})();
