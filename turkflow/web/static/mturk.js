/* MTurk turn pages: once the turn is stored, post the assignment to MTurk without another click.
   Without this script the page shows the button that does the same. */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form[data-autosubmit]");
    if (form) { form.submit(); }
  });
})();
