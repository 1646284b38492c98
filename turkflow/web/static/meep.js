/* MEEP's agent page: clicking a word or a result field fills the slot last chosen (a template's blank or
   an API's argument) with its name (u2_5, v1.name); words of one message add up in click order, a field
   replaces what the slot held. The forms then post as they do without this script. */
(function () {
  "use strict";

  var active = null;

  function choose(slot) {
    if (active) { active.classList.remove("active"); }
    active = slot;
    if (active) { active.classList.add("active"); }
  }

  function clicked(ref) {
    if (!active) {
      var box = document.getElementById("error-summary");
      box.querySelector("[data-error-text]").textContent = "choose a slot first, then click what fills it";
      box.hidden = false;
      return;
    }
    var held = active.value.trim().split(/\s+/).filter(Boolean);
    var word = /^u(\d+)_\d+$/.exec(ref);
    var sameMessage = word && held.length && held.every(function (h) {
      var m = /^u(\d+)_\d+$/.exec(h);
      return m && m[1] === word[1];
    });
    if (word && sameMessage) {
      if (held.indexOf(ref) < 0) { held.push(ref); }
      active.value = held.join(" ");
    } else {
      active.value = ref;
    }
    active.dispatchEvent(new Event("input", {bubbles: true}));
  }

  document.addEventListener("focusin", function (event) {
    if (event.target.classList && event.target.classList.contains("slot")) { choose(event.target); }
  });
  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target.closest("[data-ref]") : null;
    if (target) { clicked(target.getAttribute("data-ref")); }
  });
  document.addEventListener("submit", function (event) {
    var button = event.target.querySelector('button[type="submit"]');
    if (button) { button.disabled = true; button.classList.add("busy"); }  // one send per click
  });
})();
