// The live page: the answer's pieces as they arrive (server-sent events; see ctxstore.web.live).
(function () {
  var answer = document.getElementById("answer");
  var status = document.getElementById("status");
  var source = new EventSource(document.getElementById("events").dataset.url);
  source.addEventListener("stream", function (e) {
    answer.textContent = "";
    status.textContent = "streaming " + JSON.parse(e.data);
  });
  source.addEventListener("piece", function (e) { answer.textContent += JSON.parse(e.data); });
  source.addEventListener("done", function () { status.textContent = "answer complete"; });
  source.addEventListener("failed", function (e) {
    status.textContent = "failed: " + JSON.parse(e.data);
  });
})();
