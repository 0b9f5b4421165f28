#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include "data/corpus.hpp"
#include "data/dates.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;

TEST_CASE("dates: calendar arithmetic and known weekdays") {
  CHECK(days_from_civil({1970, 1, 1}) == 0);
  CHECK(days_from_civil({2000, 3, 1}) - days_from_civil({2000, 2, 28}) == 2);  // leap year
  CHECK(days_from_civil({1900, 3, 1}) - days_from_civil({1900, 2, 28}) == 1);  // not leap
  CHECK(weekday(days_from_civil({1970, 1, 1})) == 3);                          // Thursday
  CHECK(weekday(days_from_civil({1969, 7, 20})) == 6);  // Sunday, the Moon landing
  CHECK(weekday(days_from_civil({2000, 1, 1})) == 5);   // Saturday
  CHECK(weekday(days_from_civil({2021, 3, 3})) == 2);   // Wednesday
  for (int64_t d = -40000; d < 40000; d += 37) CHECK(days_from_civil(civil_from_days(d)) == d);
  CHECK(iso_date({2021, 3, 3}) == "2021-03-03");
}

TEST_CASE("dates: every surface format, spelled out for 2021-03-03") {
  const std::vector<std::string> want = {"3rd of March 2021",
                                         "wednesday, 3 mar 21",
                                         "03/03/2021",
                                         "March 3, 2021",
                                         "2021.03.03",
                                         "3 March 2021",
                                         "Wednesday, March 3, 2021",
                                         "wed 3 mar 2021",
                                         "3-mar-2021",
                                         "the third of march, 2021",
                                         "3.3.2021",
                                         "20210303",
                                         "Wed, 03 Mar 2021",
                                         "3/3/21",
                                         "MARCH 3RD 2021",
                                         "mar 3, '21",
                                         "Wednesday 3rd March 2021",
                                         "march the 3rd, 2021"};
  REQUIRE(date_format_count() == static_cast<int>(want.size()));
  for (int f = 0; f < date_format_count(); ++f) CHECK(format_date({2021, 3, 3}, f) == want[f]);
  // day-first, ordinals and two-digit years on other dates
  CHECK(format_date({1999, 12, 31}, 2) == "31/12/1999");
  CHECK(format_date({1999, 12, 31}, 9) == "the thirty-first of december, 1999");
  CHECK(format_date({2011, 11, 11}, 0) == "11th of November 2011");
  CHECK(format_date({2022, 1, 22}, 16) == "Saturday 22nd January 2022");
  CHECK(format_date({2005, 2, 1}, 13) == "1/2/05");
  CHECK_THROWS_AS(format_date({2021, 3, 3}, 18), Error);
  CHECK_THROWS_AS(format_date({2021, 13, 3}, 0), Error);
}

TEST_CASE("dates: generation covers every format and keeps test dates out of training") {
  DateOptions o;
  o.train_size = 3000, o.valid_size = 400, o.test_size = 400, o.seed = 11;
  const DateSplits s = generate_dates(o);
  REQUIRE(s.train.size() == 3000);
  REQUIRE(s.test.size() == 400);
  std::set<int> formats;
  std::set<int64_t> train_days, valid_days, test_days;
  for (const auto& p : s.train) train_days.insert(p.day), formats.insert(p.format);
  for (const auto& p : s.valid) valid_days.insert(p.day);
  for (const auto& p : s.test) test_days.insert(p.day), formats.insert(p.format);
  CHECK(formats.size() == static_cast<size_t>(date_format_count()));
  CHECK(test_days.size() == 400);  // distinct
  for (int64_t d : test_days) {
    CHECK(train_days.count(d) == 0);
    CHECK(valid_days.count(d) == 0);
  }
  for (int64_t d : valid_days) CHECK(train_days.count(d) == 0);
  // targets are the ISO form of the date, inside the window
  for (const auto& p : s.test) {
    CHECK(p.iso == iso_date(civil_from_days(p.day)));
    CHECK(p.human == format_date(civil_from_days(p.day), p.format));
    const int year = civil_from_days(p.day).year;
    CHECK((year >= 1950 && year <= 2049));
  }
  // also no test ISO string in train under any format
  std::set<std::string> train_iso;
  for (const auto& p : s.train) train_iso.insert(p.iso);
  for (const auto& p : s.test) CHECK(train_iso.count(p.iso) == 0);
  // same seed, same data
  const DateSplits again = generate_dates(o);
  CHECK(again.test[17].human == s.test[17].human);
  CHECK(again.train[2999].human == s.train[2999].human);
  o.year_max = 2050;
  CHECK_THROWS_WITH(generate_dates(o), Catch::Contains("100 years"));
}

TEST_CASE("dates: the shipped configs/data/dates.tsv parses and is what the generator writes") {
  const std::string path = testing::source_path("configs/data/dates.tsv");
  const TsvCorpus c = read_tsv(path);
  REQUIRE(static_cast<int64_t>(c.pairs.size()) == kShippedDateLines);
  CHECK(c.skipped == 0);
  std::set<std::string> iso;
  for (const auto& p : c.pairs) {
    CHECK(p.tgt.size() == 10);
    iso.insert(p.tgt);
  }
  CHECK(iso.size() == c.pairs.size());  // no date twice, so a line split is a date split
  // regenerate: the file is current
  const std::vector<TextPair> fresh = date_corpus();
  REQUIRE(fresh.size() == c.pairs.size());
  size_t same = 0;
  for (size_t i = 0; i < fresh.size(); ++i)
    same += fresh[i].src == c.pairs[i].src && fresh[i].tgt == c.pairs[i].tgt;
  CHECK(same == fresh.size());
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  CHECK(static_cast<long>(f.tellg()) < 300 * 1024);
}
