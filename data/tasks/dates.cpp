// dates: human-written dates -> ISO dates, generated from the seed (data/dates.hpp).
#include "data/dates.hpp"
#include "data/task_loading.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

namespace {

std::vector<TextPair> date_text(const std::vector<DatePair>& v, bool lowercase) {
  std::vector<TextPair> out;
  for (const auto& d : v) out.push_back({lowercase ? to_lower_utf8(d.human) : d.human, d.iso});
  return out;
}

}  // namespace

void load_task_dates(const DataConfig& c, DataSplits& out) {
  DateOptions o;
  o.year_min = c.year_min, o.year_max = c.year_max;
  o.train_size = c.train_size, o.valid_size = c.valid_size, o.test_size = c.test_size;
  o.seed = c.seed;
  const DateSplits d = generate_dates(o);
  text_splits(c, "dates", date_text(d.train, c.lowercase), date_text(d.valid, c.lowercase),
              date_text(d.test, c.lowercase), out);
}

}  // namespace qkv::data
