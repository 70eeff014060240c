#include "worker/config/quark_json_record.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

namespace quantd::config::quark {
namespace {

// Calls `visit(leaf, path, key)` for every leaf of a diff record, in the
// original's key order, with the path of the value it describes ("a.b[2]")
// and the key it sits under. An explicit stack: the record is as deep as the
// config, which the bounded parser limits but the walk need not recurse on.
void ForEachLeaf(const Json& record,
                 const std::function<void(const Json&, const std::string&, const std::string&)>&
                     visit) {
  struct PendingRecord {
    const Json* rec;
    std::string path;
    std::string key;
  };
  std::vector<PendingRecord> pending;
  if (!record.is_null()) pending.push_back({&record, "", ""});
  while (!pending.empty()) {
    const PendingRecord t = std::move(pending.back());
    pending.pop_back();
    const Json& rec = *t.rec;
    if (rec.is_null()) continue;
    if (rec.contains("leaf")) {
      visit(rec, t.path, t.key);
    } else if (rec.contains("array")) {
      const Json& items = rec.at("items");
      for (size_t i = items.size(); i-- > 0;) {
        pending.push_back({&items[i], t.path + "[" + std::to_string(i) + "]", t.key});
      }
    } else {
      // Pushed in reverse so that they come out in the original's order;
      // keys only the engine's side has are leaves without an original.
      const Json& keys = rec.at("keys");
      const Json& order = rec.at("order");
      for (size_t i = order.size(); i-- > 0;) {
        const std::string key = order[i].get<std::string>();
        if (!keys.contains(key)) continue;
        pending.push_back({&keys.at(key), t.path.empty() ? key : t.path + "." + key, key});
      }
    }
  }
}

}  // namespace

Json Diff(const Json& o, const Json& c) {
  if (o.is_object() && c.is_object()) {
    Json keys = Json::object();
    std::set<std::string> seen;
    for (auto it = o.begin(); it != o.end(); ++it) {
      seen.insert(it.key());
      if (c.contains(it.key())) {
        Json sub = Diff(it.value(), c.at(it.key()));
        if (!sub.is_null()) keys[it.key()] = sub;
      } else {
        keys[it.key()] = Json{{"leaf", true}, {"has_o", true}, {"o", it.value()}, {"has_c", false}};
      }
    }
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (!seen.count(it.key())) {
        keys[it.key()] = Json{{"leaf", true}, {"has_o", false}, {"has_c", true}, {"c", it.value()}};
      }
    }
    Json order = Json::array();
    for (auto it = o.begin(); it != o.end(); ++it) order.push_back(it.key());
    Json c_order = Json::array();
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (o.contains(it.key())) c_order.push_back(it.key());
    }
    if (keys.empty() && order == c_order) return nullptr;
    return Json{{"object", true}, {"order", order}, {"keys", keys}};
  }
  if (o.is_array() && c.is_array() && o.size() == c.size()) {
    Json items = Json::array();
    bool any = false;
    for (size_t i = 0; i < o.size(); ++i) {
      items.push_back(Diff(o[i], c[i]));
      any = any || !items.back().is_null();
    }
    return any ? Json{{"array", true}, {"items", items}} : Json(nullptr);
  }
  if (o == c) return nullptr;
  return Json{{"leaf", true}, {"has_o", true}, {"o", o}, {"has_c", true}, {"c", c}};
}

Json Restore(const Json& now, const Json& rec) {
  if (rec.is_null()) return now;
  if (rec.contains("leaf")) {
    return now == rec.at("c") ? rec.at("o") : now;
  }
  if (rec.contains("array")) {
    const Json& items = rec.at("items");
    if (!now.is_array() || now.size() != items.size()) return now;
    Json out = Json::array();
    for (size_t i = 0; i < now.size(); ++i) out.push_back(Restore(now[i], items[i]));
    return out;
  }
  if (!now.is_object()) return now;
  const Json& keys = rec.at("keys");
  Json values = Json::object();
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (!keys.contains(it.key())) {
      values[it.key()] = it.value();
      continue;
    }
    const Json& r = keys.at(it.key());
    if (r.contains("leaf") && !r.at("has_o").get<bool>()) {
      // Written by the canonical form only: drop it while it is unchanged.
      if (r.at("has_c").get<bool>() && it.value() == r.at("c")) continue;
      values[it.key()] = it.value();
    } else if (r.contains("leaf") && !r.at("has_c").get<bool>()) {
      values[it.key()] = it.value();  // the engine writes this key now; keep its value
    } else {
      values[it.key()] = Restore(it.value(), r);
    }
  }
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const Json& r = it.value();
    if (r.contains("leaf") && r.at("has_o").get<bool>() && !r.at("has_c").get<bool>() &&
        !now.contains(it.key())) {
      values[it.key()] = r.at("o");  // only in the original
    }
  }
  Json out = Json::object();
  for (const Json& k : rec.at("order")) {
    const std::string key = k.get<std::string>();
    if (values.contains(key)) out[key] = values.at(key);
  }
  for (auto it = values.begin(); it != values.end(); ++it) {
    if (!out.contains(it.key())) out[it.key()] = it.value();
  }
  return out;
}

std::vector<FieldViolation> CheckKeptSize(const Json& record, const std::string& prefix) {
  struct Kept {
    std::string path;
    size_t bytes;
  };
  std::vector<Kept> kept;
  size_t total = 0;
  ForEachLeaf(record, [&](const Json& leaf, const std::string& path, const std::string& key) {
    if (!leaf.at("has_o").get<bool>()) return;
    // The key and its value as written; not the path, which repeats the
    // layer globs above it.
    const size_t bytes = key.size() + leaf.at("o").dump().size();
    kept.push_back({path, bytes});
    total += bytes;
  });
  std::vector<FieldViolation> out;
  if (total <= kMaxKeptBytes) return out;
  std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.path < b.path;
  });
  constexpr size_t kNamed = 10;
  for (size_t i = 0; i < kept.size() && i < kNamed; ++i) {
    std::string why = "not modelled by quantd, so kept as written for the round trip (" +
                      std::to_string(kept[i].bytes) +
                      " bytes); such keys may hold at most " + std::to_string(kMaxKeptBytes) +
                      " bytes in all, this config's hold " + std::to_string(total);
    if (i + 1 == kNamed && kept.size() > kNamed) {
      why += " (and " + std::to_string(kept.size() - kNamed) + " smaller keys)";
    }
    out.push_back({prefix + kept[i].path, std::move(why)});
  }
  return out;
}

std::vector<std::string> UnusedKeys(const Json& record) {
  static const std::set<std::string> kDescriptive = {"version", "help", "has_kwargs"};
  std::vector<std::string> out;
  ForEachLeaf(record, [&](const Json& leaf, const std::string& path, const std::string& key) {
    if (leaf.at("has_o").get<bool>() && !leaf.at("has_c").get<bool>() &&
        !kDescriptive.count(key) && !leaf.at("o").is_null() && leaf.at("o") != Json(false)) {
      out.push_back(path);
    }
  });
  return out;
}

}  // namespace quantd::config::quark
