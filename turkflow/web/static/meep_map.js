/* MEEP's user page: the destination the agent drives to, as a marker on a Leaflet map. Tiles come from the
   requester's tile server (TURKFLOW_MEEP_TILE_URL) when one is set; without one the map is a blank
   background and the page says the coordinates. The marker's point is written back on the map element
   (data-marker) so a reader, or a test, sees where it stands without fetching any tile. */
(function () {
  "use strict";

  var element = document.getElementById("map");
  if (!element || !window.L) { return; }
  var point = [parseFloat(element.getAttribute("data-lat")), parseFloat(element.getAttribute("data-lng"))];
  var tiles = element.getAttribute("data-tiles");
  var map = window.L.map(element, {attributionControl: Boolean(tiles)}).setView(point, 15);
  if (tiles) {
    window.L.tileLayer(tiles, {maxZoom: 19}).addTo(map);
  }
  var marker = window.L.marker(point, {title: element.getAttribute("data-name") || "destination",
                                       keyboard: false}).addTo(map);
  var at = marker.getLatLng();
  element.setAttribute("data-marker", at.lat + "," + at.lng);
})();
