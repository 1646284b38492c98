// The annotator's page: the listed-value search box suggests the values of the slot type chosen (all listed
// values while none with values is chosen). Without this script the box suggests every listed value.
(function () {
  "use strict";
  const box = document.getElementById("listed-value");
  if (!box) return;
  function narrow() {
    const chosen = document.querySelector('#slots input[name="slot"]:checked');
    const own = chosen && chosen.value && document.getElementById("values-" + chosen.value);
    box.setAttribute("list", own ? own.id : "values-all");
  }
  document.querySelectorAll('#slots input[name="slot"]').forEach(function (radio) {
    radio.addEventListener("change", narrow);
  });
  narrow();
})();
