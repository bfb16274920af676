// The page's entry: <main data-view="…"> names the view the server rendered; its module fills it.
const main = document.getElementById("view");
const views = {
  board: () => import("./board.js"),
  run: () => import("./run.js"),
  diff: () => import("./diff.js"),
  compare: () => import("./compare.js"),
  batches: () => import("./batches.js"),
  batch: () => import("./batches.js"),
};
const load = views[main.dataset.view];
if (load) {
  load().then((module) => module.show(main));
}
