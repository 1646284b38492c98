/* MEEP's agent page: clicking a word or a result field fills the slot last chosen (a template's blank, an
   API's argument, or the "+" composer) with its name (u2_5, v1.name, t3.2, {}); words of one message add up
   in click order, a field replaces what the slot held, and the composer takes every click in order. Each
   slot then shows the words and values it holds, not their names: the slot's input is kept, hidden, for the
   form, and a button beside it shows what it holds and chooses it. The forms post as they do without this
   script. */
(function () {
  "use strict";

  var active = null;

  function shown(refs) {
    return refs.map(function (ref) {
      var source = document.querySelector('[data-ref="' + CSS.escape(ref) + '"]');
      return source ? source.getAttribute("data-text") : ref;
    }).join(" ");
  }

  function view(slot) { return slot.nextElementSibling; }

  function show(slot) {
    var refs = slot.value.trim().split(/\s+/).filter(Boolean);
    var box = view(slot);
    box.textContent = refs.length ? shown(refs) : (slot.classList.contains("composer-slot")
                                                   ? "click words and blanks" : "click to fill");
    box.classList.toggle("empty", !refs.length);
    box.setAttribute("data-refs", slot.value.trim());
    // its name is what it shows, after what it is (a screen reader hears the slot, then its value)
    box.setAttribute("aria-label", (slot.getAttribute("aria-label") || slot.name) + ": " + box.textContent);
  }

  function choose(slot) {
    if (active) { view(active).classList.remove("active"); }
    active = slot;
    if (active) { view(active).classList.add("active"); }
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
    if (active.classList.contains("composer-slot")) {
      held.push(ref);
      active.value = held.join(" ");
    } else if (word && sameMessage) {
      if (held.indexOf(ref) < 0) { held.push(ref); }
      active.value = held.join(" ");
    } else if (ref === "{}" || /\.\d+$/.test(ref)) {
      return;  // a template's word or a blank fills only the composer
    } else {
      active.value = ref;
    }
    show(active);
  }

  Array.prototype.forEach.call(document.querySelectorAll("input.slot"), function (slot) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "slot-view";
    button.setAttribute("data-slot", slot.name);
    slot.insertAdjacentElement("afterend", button);
    slot.type = "hidden";
    show(slot);
    button.addEventListener("click", function () { choose(slot); });
  });
  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target.closest("[data-ref]") : null;
    if (target) { clicked(target.getAttribute("data-ref")); }
  });
  document.addEventListener("submit", function (event) {
    var button = event.submitter || event.target.querySelector('button[type="submit"]');
    if (!button) { return; }
    button.classList.add("busy");
    // one send per click; disabled once the form's data is taken, so the clicked button's value is sent
    window.setTimeout(function () {
      Array.prototype.forEach.call(event.target.querySelectorAll('button[type="submit"]'),
                                   function (b) { b.disabled = true; });
    }, 0);
  });
})();
