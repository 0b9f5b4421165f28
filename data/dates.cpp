#include "data/dates.hpp"

#include <cstdio>

#include "core/random.hpp"

namespace qkv::data {

// Howard Hinnant's civil-calendar algorithms (public domain formulas): eras of 400 years,
// years starting in March so the leap day is the last day of the year.
int64_t days_from_civil(const CivilDate& d) {
  const int64_t y = d.year - (d.month <= 2 ? 1 : 0);
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t mp = (d.month + 9) % 12;
  const int64_t doy = (153 * mp + 2) / 5 + d.day - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

CivilDate civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  return {static_cast<int>(y), static_cast<int>(m), static_cast<int>(d)};
}

int weekday(int64_t days) {
  // 1970-01-01 was a Thursday (3 with Monday = 0)
  return static_cast<int>(((days % 7) + 7 + 3) % 7);
}

namespace {
const char* const kMonths[] = {"January",   "February", "March",    "April",
                               "May",       "June",     "July",     "August",
                               "September", "October",  "November", "December"};
const char* const kWeekdays[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                 "Friday", "Saturday", "Sunday"};
const char* const kOrdinals[] = {"first",        "second",        "third",          "fourth",
                                 "fifth",        "sixth",         "seventh",        "eighth",
                                 "ninth",        "tenth",         "eleventh",       "twelfth",
                                 "thirteenth",   "fourteenth",    "fifteenth",      "sixteenth",
                                 "seventeenth",  "eighteenth",    "nineteenth",     "twentieth",
                                 "twenty-first", "twenty-second", "twenty-third",   "twenty-fourth",
                                 "twenty-fifth", "twenty-sixth",  "twenty-seventh", "twenty-eighth",
                                 "twenty-ninth", "thirtieth",     "thirty-first"};

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}
std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}
std::string abbr(const char* name) { return std::string(name, 3); }  // "March" -> "Mar"

std::string suffixed(int day) {  // 1st 2nd 3rd 4th ... 11th 12th 13th ... 21st 22nd 23rd
  const char* s = "th";
  if (day % 100 < 11 || day % 100 > 13) {
    if (day % 10 == 1)
      s = "st";
    else if (day % 10 == 2)
      s = "nd";
    else if (day % 10 == 3)
      s = "rd";
  }
  return std::to_string(day) + s;
}

std::string num(int v, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*d", width, v);
  return buf;
}
}  // namespace

std::string iso_date(const CivilDate& d) {
  return num(d.year, 4) + "-" + num(d.month, 2) + "-" + num(d.day, 2);
}

int date_format_count() { return 18; }

std::string format_date(const CivilDate& d, int f) {
  QKV_CHECK(d.month >= 1 && d.month <= 12 && d.day >= 1 && d.day <= 31, "format_date",
            "not a date: ", d.year, "-", d.month, "-", d.day);
  const std::string month = kMonths[d.month - 1];
  const std::string wday = kWeekdays[weekday(days_from_civil(d))];
  const std::string D = std::to_string(d.day), DD = num(d.day, 2);
  const std::string M = std::to_string(d.month), MM = num(d.month, 2);
  const std::string YYYY = num(d.year, 4), YY = num(((d.year % 100) + 100) % 100, 2);
  switch (f) {
    case 0:
      return suffixed(d.day) + " of " + month + " " + YYYY;  // 3rd of March 2021
    case 1:
      return lower(wday) + ", " + D + " " + lower(abbr(month.c_str())) + " " +
             YY;  // wednesday, 3 mar 21
    case 2:
      return DD + "/" + MM + "/" + YYYY;  // 03/03/2021
    case 3:
      return month + " " + D + ", " + YYYY;  // March 3, 2021
    case 4:
      return YYYY + "." + MM + "." + DD;  // 2021.03.03
    case 5:
      return D + " " + month + " " + YYYY;  // 3 March 2021
    case 6:
      return wday + ", " + month + " " + D + ", " + YYYY;  // Wednesday, March 3, 2021
    case 7:
      return lower(abbr(wday.c_str())) + " " + D + " " + lower(abbr(month.c_str())) + " " +
             YYYY;  // wed 3 mar 2021
    case 8:
      return D + "-" + lower(abbr(month.c_str())) + "-" + YYYY;  // 3-mar-2021
    case 9:
      return "the " + std::string(kOrdinals[d.day - 1]) + " of " + lower(month) + ", " +
             YYYY;  // the third of march, 2021
    case 10:
      return D + "." + M + "." + YYYY;  // 3.3.2021
    case 11:
      return YYYY + MM + DD;  // 20210303
    case 12:
      return abbr(wday.c_str()) + ", " + DD + " " + abbr(month.c_str()) + " " +
             YYYY;  // Wed, 03 Mar 2021
    case 13:
      return D + "/" + M + "/" + YY;  // 3/3/21
    case 14:
      return upper(month) + " " + upper(suffixed(d.day)) + " " + YYYY;  // MARCH 3RD 2021
    case 15:
      return lower(abbr(month.c_str())) + " " + D + ", '" + YY;  // mar 3, '21
    case 16:
      return wday + " " + suffixed(d.day) + " " + month + " " + YYYY;  // Wednesday 3rd March 2021
    case 17:
      return lower(month) + " the " + suffixed(d.day) + ", " + YYYY;  // march the 3rd, 2021
    default:
      throw Error(cat("format_date: format ", f, " out of range [0, ", date_format_count(), ")"));
  }
}

DateSplits generate_dates(const DateOptions& o) {
  QKV_CHECK(
      o.year_min <= o.year_max && o.year_max - o.year_min < 100, "generate_dates",
      "need year_min <= year_max within 100 years (two-digit years must be unambiguous), got ",
      o.year_min, "..", o.year_max);
  QKV_CHECK(o.year_min >= 0 && o.year_max <= 9999, "generate_dates", "years must be 0..9999");
  QKV_CHECK(o.train_size >= 0 && o.valid_size >= 0 && o.test_size >= 0, "generate_dates",
            "negative split size");
  const int64_t first = days_from_civil({o.year_min, 1, 1});
  const int64_t ndays = days_from_civil({o.year_max, 12, 31}) - first + 1;
  QKV_CHECK(o.valid_size + o.test_size < ndays ||
                (o.train_size == 0 && o.valid_size + o.test_size <= ndays),
            "generate_dates", "valid_size + test_size = ", o.valid_size + o.test_size,
            " leaves no training dates among the ", ndays, " days of ", o.year_min, "..",
            o.year_max);
  Generator g(o.seed);
  const std::vector<int64_t> days = randperm(ndays, g);
  auto pair_of = [&](int64_t day) {
    const CivilDate d = civil_from_days(day);
    const int f = static_cast<int>(g.next_int(date_format_count()));
    return DatePair{format_date(d, f), iso_date(d), f, day};
  };
  DateSplits out;
  size_t k = 0;
  for (int64_t i = 0; i < o.test_size; ++i) out.test.push_back(pair_of(first + days[k++]));
  for (int64_t i = 0; i < o.valid_size; ++i) out.valid.push_back(pair_of(first + days[k++]));
  const size_t pool = days.size() - k;
  for (int64_t i = 0; i < o.train_size; ++i)
    out.train.push_back(pair_of(first + days[k + static_cast<size_t>(i) % pool]));
  return out;
}

std::vector<TextPair> date_corpus(int64_t lines, uint64_t seed) {
  DateOptions o;
  o.train_size = lines, o.valid_size = 0, o.test_size = 0, o.seed = seed;
  const int64_t ndays =
      days_from_civil({o.year_max, 12, 31}) - days_from_civil({o.year_min, 1, 1}) + 1;
  QKV_CHECK(lines >= 0 && lines <= ndays, "date_corpus", "lines must be in [0, ", ndays,
            "] so that no date repeats, got ", lines);
  std::vector<TextPair> out;
  for (const DatePair& d : generate_dates(o).train) out.push_back({d.human, d.iso});
  return out;
}

}  // namespace qkv::data
