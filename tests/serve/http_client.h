// A blocking HTTP/1.1 client on POSIX sockets for the loopback tests: raw bytes out (so tests can
// send broken requests), one response in (status, headers, Content-Length body), or every byte
// until the server closes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <string>

namespace weft::serve::testing {

struct Response {
  int status = 0;  ///< 0: the connection closed (or timed out) before a response
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;
};

class Connection {
 public:
  /// A connection to `port` on loopback (open() is false when it failed).
  explicit Connection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    connect(port);
  }
  /// A socket not connected yet (its descriptor taken now): see connect().
  Connection() { fd_ = ::socket(AF_INET, SOCK_STREAM, 0); }
  /// Connects the socket to `port` on loopback; closes it when that fails.
  bool connect(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
    return fd_ >= 0;
  }
  ~Connection() { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool open() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send(const std::string& bytes) {
    size_t done = 0;
    while (fd_ >= 0 && done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return done == bytes.size();
  }
  /// Whether the server closed the connection within `ms` (reads and drops anything it sent).
  bool closed_within(int ms) {
    char buf[4096];
    pollfd p{fd_, POLLIN, 0};
    while (::poll(&p, 1, ms) > 0) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
    return false;
  }
  /// Every byte the server sends until it closes the connection (waiting up to `ms` for each
  /// chunk), with what read() received past its response; `closed` says whether it closed.
  std::string read_until_closed(int ms, bool* closed = nullptr) {
    std::string all = std::move(pending_);
    pending_.clear();
    bool eof = false;
    char buf[65536];
    pollfd p{fd_, POLLIN, 0};
    while (fd_ >= 0 && ::poll(&p, 1, ms) > 0) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof = true;
        break;
      }
      all.append(buf, static_cast<size_t>(n));
    }
    if (closed) *closed = eof;
    return all;
  }
  /// Reads one response (waiting up to `ms` for each chunk). Bytes past it (a second response)
  /// are kept for the next read.
  Response read(int ms = 60000) {
    Response r;
    std::string head = std::move(pending_);
    pending_.clear();
    while (head.find("\r\n\r\n") == std::string::npos) {
      if (!fill(head, ms)) return r;
    }
    const size_t end = head.find("\r\n\r\n");
    std::string rest = head.substr(end + 4);
    head.resize(end);
    if (head.rfind("HTTP/1.1 ", 0) != 0) return r;
    size_t pos = head.find("\r\n");
    const int status = std::stoi(head.substr(9, 3));
    while (pos != std::string::npos) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string line =
          head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string key = line.substr(0, colon);
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        r.headers[key] = line.substr(line.find_first_not_of(' ', colon + 1));
      }
      pos = next;
    }
    const size_t length =
        r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (rest.size() < length) {
      if (!fill(rest, ms)) return r;
    }
    r.body = rest.substr(0, length);
    pending_ = rest.substr(length);
    r.status = status;
    return r;
  }

 private:
  bool fill(std::string& into, int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (fd_ < 0 || ::poll(&p, 1, ms) <= 0) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    into.append(buf, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string pending_;  // received past the last response read
};

/// A request's bytes.
inline std::string request(const std::string& method, const std::string& target,
                           const std::string& content_type = "", const std::string& body = "",
                           bool keep_alive = true) {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  if (!body.empty() || method == "POST")
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!keep_alive) r += "Connection: close\r\n";
  return r + "\r\n" + body;
}

}  // namespace weft::serve::testing
