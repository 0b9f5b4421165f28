// The date translation task: human-written dates -> ISO 8601 ("3rd of March 2021" ->
// "2021-03-03"), in 18 surface formats (words and numbers, with and without weekday).
//
// Day-first conventions only ("03/04/2021" is 3 April), so no source is ambiguous. Two-digit
// years map into the 100-year window starting at year_min (default 1950..2049: "49" is 2049,
// "50" is 1950), which is why the window may not exceed 100 years. Train, valid and test are
// split by date: the calendar days of the window are shuffled from the seed, the first
// test_size days are test, the next valid_size valid, and train draws from the rest only, so a
// test date never appears in training in any format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace qkv::data {

struct CivilDate {
  int year, month, day;  // month 1..12, day 1..31
  bool operator==(const CivilDate&) const = default;
};

int64_t days_from_civil(const CivilDate& d);  // days since 1970-01-01 (proleptic Gregorian)
CivilDate civil_from_days(int64_t days);
int weekday(int64_t days);                 // 0 = Monday .. 6 = Sunday
std::string iso_date(const CivilDate& d);  // "2021-03-03"

int date_format_count();  // 18
// d in surface format f (0 <= f < date_format_count()); two-digit years are year % 100.
std::string format_date(const CivilDate& d, int f);

struct DatePair {
  std::string human;  // source
  std::string iso;    // target
  int format;
  int64_t day;  // days_from_civil of the date
};

struct DateOptions {
  int year_min = 1950;
  int year_max = 2049;  // year_max - year_min < 100
  int64_t train_size = 10000;
  int64_t valid_size = 500;
  int64_t test_size = 500;
  uint64_t seed = 0;
};

struct DateSplits {
  std::vector<DatePair> train, valid, test;
};

// Valid and test use distinct dates; train uses distinct dates while its pool lasts, then
// reuses them in fresh formats. Same options -> same pairs.
DateSplits generate_dates(const DateOptions& o);

// A corpus of `lines` pairs on distinct dates of 1950..2049 in random formats: what
// configs/data/dates.tsv holds (qkv_gen_dates writes it). Because no date repeats, any split
// of its lines is a split by date.
inline constexpr int64_t kShippedDateLines = 5000;
inline constexpr uint64_t kShippedDateSeed = 2021;
std::vector<TextPair> date_corpus(int64_t lines = kShippedDateLines,
                                  uint64_t seed = kShippedDateSeed);

}  // namespace qkv::data
